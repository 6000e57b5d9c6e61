/// A fieldless enum that is written as snake_case text in the log and on the wire.
macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident, $kind:literal { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::Error;

            fn from_str(s: &str) -> Result<$name, $crate::Error> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s).ok_or_else(|| {
                    $crate::Error::UnknownVariant {
                        kind: $kind,
                        value: s.to_owned(),
                        expected: concat!($($text, " "),+),
                    }
                })
            }
        }
    };
}

pub(crate) use string_enum;
