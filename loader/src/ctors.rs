//! NVIDIA constructor tables: PTX has no sections, so the loader gathers the `__init_array_object_<name>_<priority>`
//! and `__fini_array_object_<name>_<priority>` globals (LLVM's NVPTX scheme), orders them by priority and hands the
//! arrays to the startup through `__init_array_start/_end` and `__fini_array_start/_end`.

use gpu_startup_protocol::abi::{FINI_OBJECT_PREFIX, INIT_OBJECT_PREFIX};

use crate::error::{LoaderError, Result};

/// The constructor and destructor globals of an image, each array in ascending priority order (the order a linker
/// gives `.init_array.N` sections): the startup runs constructors forwards and destructors backwards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConstructorTable {
    pub init: Vec<String>,
    pub fini: Vec<String>,
}

impl ConstructorTable {
    /// Picks the constructor and destructor globals out of an image's symbol names. Among equal priorities, the
    /// image's order is kept.
    pub fn from_symbols<'a>(symbols: impl IntoIterator<Item = &'a str>) -> Result<Self> {
        let mut init = Vec::new();
        let mut fini = Vec::new();
        for symbol in symbols {
            if let Some(rest) = symbol.strip_prefix(INIT_OBJECT_PREFIX) {
                init.push((priority(symbol, rest)?, symbol.to_owned()));
            } else if let Some(rest) = symbol.strip_prefix(FINI_OBJECT_PREFIX) {
                fini.push((priority(symbol, rest)?, symbol.to_owned()));
            }
        }
        init.sort_by_key(|(priority, _)| *priority);
        fini.sort_by_key(|(priority, _)| *priority);
        Ok(Self {
            init: init.into_iter().map(|(_, name)| name).collect(),
            fini: fini.into_iter().map(|(_, name)| name).collect(),
        })
    }

    /// The table of an image's global symbols.
    pub fn of(image: &crate::image::Image) -> Result<Self> {
        Self::from_symbols(image.global_symbols().iter().map(String::as_str))
    }

    pub fn is_empty(&self) -> bool {
        self.init.is_empty() && self.fini.is_empty()
    }
}

/// The priority suffix of `<name>_<priority>`: a decimal number from 0 to 65535.
fn priority(symbol: &str, name_and_priority: &str) -> Result<u16> {
    let problem =
        |problem: &str| LoaderError::BadConstructor { symbol: symbol.to_owned(), problem: problem.to_owned() };
    let (name, digits) =
        name_and_priority.rsplit_once('_').ok_or_else(|| problem("expected `<name>_<priority>` after the prefix"))?;
    if name.is_empty() {
        return Err(problem("the function name is empty"));
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(problem("the priority suffix is not a decimal number"));
    }
    digits.parse().map_err(|_| problem("the priority is above 65535"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_numeric_priority_keeping_image_order_for_ties() {
        let table = ConstructorTable::from_symbols([
            "__init_array_object_late_65535",
            "__init_array_object_with_underscores_101",
            "main",
            "__fini_array_object_b_200",
            "__init_array_object_first_9",
            "__init_array_object_tie_a_101",
            "__fini_array_object_a_1000",
            "__fini_array_object_c_3",
        ])
        .unwrap();
        assert_eq!(
            table.init,
            [
                "__init_array_object_first_9",
                "__init_array_object_with_underscores_101",
                "__init_array_object_tie_a_101",
                "__init_array_object_late_65535"
            ]
        );
        assert_eq!(table.fini, ["__fini_array_object_c_3", "__fini_array_object_b_200", "__fini_array_object_a_1000"]);
    }

    #[test]
    fn bad_suffixes_are_named() {
        for (symbol, problem) in [
            ("__init_array_object_noprio", "expected `<name>_<priority>`"),
            ("__init_array_object_f_", "not a decimal number"),
            ("__init_array_object_f_1x", "not a decimal number"),
            ("__fini_array_object_f_-1", "not a decimal number"),
            ("__init_array_object_f_65536", "above 65535"),
            ("__init_array_object__7", "function name is empty"),
        ] {
            let error = ConstructorTable::from_symbols([symbol]).unwrap_err().to_string();
            assert!(error.contains(symbol) && error.contains(problem), "{error}");
        }
    }

    #[test]
    fn an_image_without_constructors_has_an_empty_table() {
        assert!(ConstructorTable::from_symbols(["_begin", "_start", "_end", "__init_array_start"]).unwrap().is_empty());
    }
}
