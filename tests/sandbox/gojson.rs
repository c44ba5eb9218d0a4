//! capdeck's Go-compatible JSON (`vcap::gojson`) against Go's `encoding/json`: the oracle's
//! recorded cases and properties over generated values.

mod oracle;
mod props;
