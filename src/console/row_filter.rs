//! The `/` filter's meaning: which rows a filter text keeps.

/// The `/` filter, as k9s reads it: a case-insensitive regular expression, `!` in front for the
/// rows that do not match. Text that is not a valid expression matches as plain text, and the
/// title line says why.
pub struct RowFilter {
    inverse: bool,
    pattern: Result<regex::Regex, String>,
    text: String,
}

impl RowFilter {
    pub fn parse(filter: &str) -> Self {
        let (inverse, text) = match filter.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, filter),
        };
        let pattern =
            regex::RegexBuilder::new(text).case_insensitive(true).size_limit(1 << 20).build().map_err(|error| {
                match error {
                    regex::Error::Syntax(text) => text.lines().last().unwrap_or_default().trim().to_string(),
                    other => other.to_string(),
                }
            });
        Self { inverse, pattern, text: text.to_lowercase() }
    }

    pub fn matches(&self, row_text: &str) -> bool {
        let found = match &self.pattern {
            Ok(pattern) => pattern.is_match(row_text),
            Err(_) => row_text.contains(&self.text),
        };
        found != self.inverse
    }

    /// Why the filter is matched as plain text, if it is.
    pub fn error(&self) -> Option<&str> {
        self.pattern.as_ref().err().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_is_a_regex_with_an_inverse_and_says_when_it_is_not() {
        let rows = ["cap-hr hr-portal-emea-1 ready", "cap-shop bookshop-t10 upgradeerror", "cap-shop travel ready"];
        let matching = |filter: &str| -> Vec<usize> {
            let filter = RowFilter::parse(filter);
            (0..rows.len()).filter(|&i| filter.matches(rows[i])).collect()
        };
        assert_eq!(matching("ready"), [0, 2]);
        assert_eq!(matching("READY"), [0, 2], "case-insensitive");
        assert_eq!(matching("emea-[0-9]|t10"), [0, 1], "a regular expression");
        assert_eq!(matching("!ready"), [1], "! keeps the rows that do not match");
        assert_eq!(matching("!^cap-shop"), [0]);
        let broken = RowFilter::parse("hr-(");
        assert!(broken.error().is_some_and(|why| !why.is_empty()), "an invalid regex says so");
        assert_eq!(matching("hr-("), Vec::<usize>::new(), "and matches as plain text");
    }
}
