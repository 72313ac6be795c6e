//! A std test binary of 1,000 trivial plain `#[test]`s (`m00::t0` to `m99::t9`), for the benchmark of what a std
//! test costs under the loader, libtest's parent (`gpu-bench`'s `tests-per-test-std`): each test is one run of
//! the three kernels on the loaded module, with libtest's own code choosing and reporting it.

/// Ten tests, `t0` to `t9`, in each module it is given.
#[cfg(test)]
macro_rules! ten_tests_in {
    ($($module:ident)*) => {
        $(
            mod $module {
                #[test]
                fn t0() {}
                #[test]
                fn t1() {}
                #[test]
                fn t2() {}
                #[test]
                fn t3() {}
                #[test]
                fn t4() {}
                #[test]
                fn t5() {}
                #[test]
                fn t6() {}
                #[test]
                fn t7() {}
                #[test]
                fn t8() {}
                #[test]
                fn t9() {}
            }
        )*
    };
}

#[cfg(test)]
ten_tests_in!(
    m00 m01 m02 m03 m04 m05 m06 m07 m08 m09 m10 m11 m12 m13 m14 m15 m16 m17 m18 m19 m20 m21 m22 m23 m24
    m25 m26 m27 m28 m29 m30 m31 m32 m33 m34 m35 m36 m37 m38 m39 m40 m41 m42 m43 m44 m45 m46 m47 m48 m49
    m50 m51 m52 m53 m54 m55 m56 m57 m58 m59 m60 m61 m62 m63 m64 m65 m66 m67 m68 m69 m70 m71 m72 m73 m74
    m75 m76 m77 m78 m79 m80 m81 m82 m83 m84 m85 m86 m87 m88 m89 m90 m91 m92 m93 m94 m95 m96 m97 m98 m99
);
