use std::fmt;
use std::str::FromStr;

use crate::Error;

/// A workspace's plan. The public API is part of STUDIO only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plan {
    /// The free plan: no API.
    Free,
    /// For creators: no API.
    Creator,
    /// For studios: the API is included.
    Studio,
}

impl Plan {
    /// Every plan, cheapest first.
    pub const ALL: [Plan; 3] = [Plan::Free, Plan::Creator, Plan::Studio];

    /// `FREE`, `CREATOR` or `STUDIO`, as the APIs write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "FREE",
            Plan::Creator => "CREATOR",
            Plan::Studio => "STUDIO",
        }
    }

    /// Whether requests with the workspace's API keys are served (else 403).
    /// Keys of other plans are kept and work again once the workspace is back on STUDIO.
    pub fn includes_api(self) -> bool {
        self == Plan::Studio
    }
}

impl FromStr for Plan {
    type Err = Error;

    /// Exact upper-case names only: one spelling per plan, as on the wire.
    fn from_str(s: &str) -> Result<Self, Error> {
        Plan::ALL
            .into_iter()
            .find(|plan| plan.as_str() == s)
            .ok_or_else(|| Error::UnknownPlan(s.to_owned()))
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Plan {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exact_names_only() {
        for plan in Plan::ALL {
            assert_eq!(plan.as_str().parse::<Plan>(), Ok(plan));
        }
        for bad in ["", "studio", "Studio", "PRO", " STUDIO"] {
            assert_eq!(bad.parse::<Plan>(), Err(Error::UnknownPlan(bad.into())));
        }
    }

    #[test]
    fn only_studio_includes_the_api() {
        assert!(Plan::Studio.includes_api());
        assert!(!Plan::Creator.includes_api());
        assert!(!Plan::Free.includes_api());
    }
}
