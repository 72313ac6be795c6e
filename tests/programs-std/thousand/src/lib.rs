//! A std test binary of 1,000 trivial plain `#[test]`s (`m00::t0` to `m99::t9`), for the benchmark of what a std
//! test costs under the loader, libtest's parent (`gpu-bench`'s `tests-per-test-std`): each test is one run of
//! the three kernels on the loaded module, with libtest's own code choosing and reporting it.

/// Ten tests, `t0` to `t9`, in the module that invokes it.
#[cfg(test)]
macro_rules! ten_tests {
    () => {
        crate::ten_tests!(@each t0 t1 t2 t3 t4 t5 t6 t7 t8 t9);
    };
    (@each $($name:ident)*) => {
        $(
            #[test]
            fn $name() {}
        )*
    };
}
#[cfg(test)]
use ten_tests;

#[cfg(test)]
mod m00 {
    super::ten_tests!();
}
#[cfg(test)]
mod m01 {
    super::ten_tests!();
}
#[cfg(test)]
mod m02 {
    super::ten_tests!();
}
#[cfg(test)]
mod m03 {
    super::ten_tests!();
}
#[cfg(test)]
mod m04 {
    super::ten_tests!();
}
#[cfg(test)]
mod m05 {
    super::ten_tests!();
}
#[cfg(test)]
mod m06 {
    super::ten_tests!();
}
#[cfg(test)]
mod m07 {
    super::ten_tests!();
}
#[cfg(test)]
mod m08 {
    super::ten_tests!();
}
#[cfg(test)]
mod m09 {
    super::ten_tests!();
}
#[cfg(test)]
mod m10 {
    super::ten_tests!();
}
#[cfg(test)]
mod m11 {
    super::ten_tests!();
}
#[cfg(test)]
mod m12 {
    super::ten_tests!();
}
#[cfg(test)]
mod m13 {
    super::ten_tests!();
}
#[cfg(test)]
mod m14 {
    super::ten_tests!();
}
#[cfg(test)]
mod m15 {
    super::ten_tests!();
}
#[cfg(test)]
mod m16 {
    super::ten_tests!();
}
#[cfg(test)]
mod m17 {
    super::ten_tests!();
}
#[cfg(test)]
mod m18 {
    super::ten_tests!();
}
#[cfg(test)]
mod m19 {
    super::ten_tests!();
}
#[cfg(test)]
mod m20 {
    super::ten_tests!();
}
#[cfg(test)]
mod m21 {
    super::ten_tests!();
}
#[cfg(test)]
mod m22 {
    super::ten_tests!();
}
#[cfg(test)]
mod m23 {
    super::ten_tests!();
}
#[cfg(test)]
mod m24 {
    super::ten_tests!();
}
#[cfg(test)]
mod m25 {
    super::ten_tests!();
}
#[cfg(test)]
mod m26 {
    super::ten_tests!();
}
#[cfg(test)]
mod m27 {
    super::ten_tests!();
}
#[cfg(test)]
mod m28 {
    super::ten_tests!();
}
#[cfg(test)]
mod m29 {
    super::ten_tests!();
}
#[cfg(test)]
mod m30 {
    super::ten_tests!();
}
#[cfg(test)]
mod m31 {
    super::ten_tests!();
}
#[cfg(test)]
mod m32 {
    super::ten_tests!();
}
#[cfg(test)]
mod m33 {
    super::ten_tests!();
}
#[cfg(test)]
mod m34 {
    super::ten_tests!();
}
#[cfg(test)]
mod m35 {
    super::ten_tests!();
}
#[cfg(test)]
mod m36 {
    super::ten_tests!();
}
#[cfg(test)]
mod m37 {
    super::ten_tests!();
}
#[cfg(test)]
mod m38 {
    super::ten_tests!();
}
#[cfg(test)]
mod m39 {
    super::ten_tests!();
}
#[cfg(test)]
mod m40 {
    super::ten_tests!();
}
#[cfg(test)]
mod m41 {
    super::ten_tests!();
}
#[cfg(test)]
mod m42 {
    super::ten_tests!();
}
#[cfg(test)]
mod m43 {
    super::ten_tests!();
}
#[cfg(test)]
mod m44 {
    super::ten_tests!();
}
#[cfg(test)]
mod m45 {
    super::ten_tests!();
}
#[cfg(test)]
mod m46 {
    super::ten_tests!();
}
#[cfg(test)]
mod m47 {
    super::ten_tests!();
}
#[cfg(test)]
mod m48 {
    super::ten_tests!();
}
#[cfg(test)]
mod m49 {
    super::ten_tests!();
}
#[cfg(test)]
mod m50 {
    super::ten_tests!();
}
#[cfg(test)]
mod m51 {
    super::ten_tests!();
}
#[cfg(test)]
mod m52 {
    super::ten_tests!();
}
#[cfg(test)]
mod m53 {
    super::ten_tests!();
}
#[cfg(test)]
mod m54 {
    super::ten_tests!();
}
#[cfg(test)]
mod m55 {
    super::ten_tests!();
}
#[cfg(test)]
mod m56 {
    super::ten_tests!();
}
#[cfg(test)]
mod m57 {
    super::ten_tests!();
}
#[cfg(test)]
mod m58 {
    super::ten_tests!();
}
#[cfg(test)]
mod m59 {
    super::ten_tests!();
}
#[cfg(test)]
mod m60 {
    super::ten_tests!();
}
#[cfg(test)]
mod m61 {
    super::ten_tests!();
}
#[cfg(test)]
mod m62 {
    super::ten_tests!();
}
#[cfg(test)]
mod m63 {
    super::ten_tests!();
}
#[cfg(test)]
mod m64 {
    super::ten_tests!();
}
#[cfg(test)]
mod m65 {
    super::ten_tests!();
}
#[cfg(test)]
mod m66 {
    super::ten_tests!();
}
#[cfg(test)]
mod m67 {
    super::ten_tests!();
}
#[cfg(test)]
mod m68 {
    super::ten_tests!();
}
#[cfg(test)]
mod m69 {
    super::ten_tests!();
}
#[cfg(test)]
mod m70 {
    super::ten_tests!();
}
#[cfg(test)]
mod m71 {
    super::ten_tests!();
}
#[cfg(test)]
mod m72 {
    super::ten_tests!();
}
#[cfg(test)]
mod m73 {
    super::ten_tests!();
}
#[cfg(test)]
mod m74 {
    super::ten_tests!();
}
#[cfg(test)]
mod m75 {
    super::ten_tests!();
}
#[cfg(test)]
mod m76 {
    super::ten_tests!();
}
#[cfg(test)]
mod m77 {
    super::ten_tests!();
}
#[cfg(test)]
mod m78 {
    super::ten_tests!();
}
#[cfg(test)]
mod m79 {
    super::ten_tests!();
}
#[cfg(test)]
mod m80 {
    super::ten_tests!();
}
#[cfg(test)]
mod m81 {
    super::ten_tests!();
}
#[cfg(test)]
mod m82 {
    super::ten_tests!();
}
#[cfg(test)]
mod m83 {
    super::ten_tests!();
}
#[cfg(test)]
mod m84 {
    super::ten_tests!();
}
#[cfg(test)]
mod m85 {
    super::ten_tests!();
}
#[cfg(test)]
mod m86 {
    super::ten_tests!();
}
#[cfg(test)]
mod m87 {
    super::ten_tests!();
}
#[cfg(test)]
mod m88 {
    super::ten_tests!();
}
#[cfg(test)]
mod m89 {
    super::ten_tests!();
}
#[cfg(test)]
mod m90 {
    super::ten_tests!();
}
#[cfg(test)]
mod m91 {
    super::ten_tests!();
}
#[cfg(test)]
mod m92 {
    super::ten_tests!();
}
#[cfg(test)]
mod m93 {
    super::ten_tests!();
}
#[cfg(test)]
mod m94 {
    super::ten_tests!();
}
#[cfg(test)]
mod m95 {
    super::ten_tests!();
}
#[cfg(test)]
mod m96 {
    super::ten_tests!();
}
#[cfg(test)]
mod m97 {
    super::ten_tests!();
}
#[cfg(test)]
mod m98 {
    super::ten_tests!();
}
#[cfg(test)]
mod m99 {
    super::ten_tests!();
}
