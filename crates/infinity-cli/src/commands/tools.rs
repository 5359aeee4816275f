//! `infinity tools internal`: every internal tool, its category and whether it is on by default.

use anyhow::Result;

pub(crate) fn tools_internal(json: bool) -> Result<u8> {
    let categories = infinity_library::categories();
    let listing = categories.listing();
    if json {
        crate::out!("{}", serde_json::to_string_pretty(&listing)?);
        return Ok(0);
    }
    for category in categories.iter() {
        let tools: Vec<&str> = listing
            .iter()
            .filter(|t| t.category == category.flag)
            .map(|t| t.spec.name.as_str())
            .collect();
        crate::out!(
            "{:<10} {:<4} {}",
            category.flag,
            if category.default_enabled {
                "on"
            } else {
                "off"
            },
            if tools.is_empty() {
                "(no tools yet)".to_owned()
            } else {
                tools.join(", ")
            }
        );
    }
    Ok(0)
}
