//! Stable string codes for the domain's enums: one spelling each, used verbatim in JSON, the
//! database, URLs and the UI, so the layers cannot drift apart.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{value}`")]
pub struct UnknownValue {
    pub kind: &'static str,
    pub value: String,
}

/// Declares a fieldless enum whose variants have one stable lowercase code each, used verbatim
/// in JSON, the database and URLs, with `code()`, `ALL`, `Display` and `FromStr`.
macro_rules! coded_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident ($kind:literal) { $($(#[$vmeta:meta])* $variant:ident = $code:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        $vis enum $name {
            // utoipa does not see through the macro's `$code` in `serde(rename)`; it does in its own.
            $($(#[$vmeta])* #[serde(rename = $code)] #[cfg_attr(feature = "openapi", schema(rename = $code))] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn code(self) -> &'static str {
                match self { $($name::$variant => $code),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.code())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::codes::UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($code => Ok($name::$variant),)+
                    _ => Err($crate::codes::UnknownValue { kind: $kind, value: s.to_owned() }),
                }
            }
        }
    };
}
pub(crate) use coded_enum;
