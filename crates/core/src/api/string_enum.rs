//! Enums over strings that keep values they do not know.
//!
//! Upstream adds states and reasons over time; a capdeck built today must still read tomorrow's
//! objects. A plain serde enum would fail the whole object on an unknown value, so every
//! string enum of the CRDs is generated here with an `Other(String)` arm that round-trips the
//! text, while the CRD schema still lists exactly the known values.

/// `string_enum! { pub Name { Variant = "text", ... } }`; the first variant is the `Default`.
macro_rules! string_enum {
    ($(#[$meta:meta])* $vis:vis $name:ident { $first:ident = $first_text:literal $(, $variant:ident = $text:literal)* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        $vis enum $name {
            #[default]
            $first,
            $($variant,)*
            /// A value this version of capdeck does not know; kept verbatim.
            Other(String),
        }

        impl $name {
            /// Every value the CRD schema allows.
            pub const KNOWN: &'static [&'static str] = &[$first_text $(, $text)*];

            pub fn as_str(&self) -> &str {
                match self {
                    Self::$first => $first_text,
                    $(Self::$variant => $text,)*
                    Self::Other(text) => text,
                }
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                match text {
                    $first_text => Self::$first,
                    $($text => Self::$variant,)*
                    other => Self::Other(other.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
                Ok(Self::from(text.as_ref()))
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": Self::KNOWN })
            }
        }
    };
}

pub(crate) use string_enum;

#[cfg(test)]
mod tests {
    string_enum! {
        pub Color { Empty = "", Red = "Red", Blue = "Blue" }
    }

    #[test]
    fn known_values_round_trip() {
        let parsed: Color = serde_json::from_str("\"Red\"").expect("string");
        assert_eq!(parsed, Color::Red);
        assert_eq!(serde_json::to_string(&Color::Empty).expect("ser"), "\"\"");
    }

    #[test]
    fn unknown_values_are_kept_not_fatal() {
        let parsed: Color = serde_json::from_str("\"Magenta\"").expect("string");
        assert_eq!(parsed, Color::Other("Magenta".into()));
        assert_eq!(serde_json::to_string(&parsed).expect("ser"), "\"Magenta\"");
    }

    #[test]
    fn schema_lists_only_known_values() {
        let schema = schemars::schema_for!(Color);
        assert_eq!(schema.get("enum"), Some(&serde_json::json!(["", "Red", "Blue"])));
    }
}
