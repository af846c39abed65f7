//! Cursor pagination, as the admin API's lists take it: `limit` (1–250, default
//! 50) items from after (or before) the item whose id is the cursor, and the id to
//! continue from when more follow.

use hookline_domain::Error as Invalid;

/// Items per page when the caller names none.
pub const DEFAULT_LIMIT: u32 = 50;
/// Items per page at most.
pub const MAX_LIMIT: u32 = 250;

/// Which page of a list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// The id of the item the page starts after (in the list's own order).
    pub cursor: Option<String>,
    /// Items per page, from 1 to [`MAX_LIMIT`].
    pub limit: u32,
}

impl PageRequest {
    /// `limit` as given (`None`: the default), checked.
    pub fn new(cursor: Option<String>, limit: Option<u32>) -> Result<PageRequest, Invalid> {
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Invalid::Invalid {
                field: "limit",
                reason: format!("{limit} is not between 1 and {MAX_LIMIT}"),
            });
        }
        Ok(PageRequest { cursor, limit })
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// This page's items, in the list's order.
    pub items: Vec<T>,
    /// The id to continue from; `None` at the end.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// A page of a list read in full (the short ones: a workspace's keys, webhooks
    /// and accounts), in its order; a cursor that names no item starts nowhere.
    pub(crate) fn of_list(
        items: Vec<T>,
        request: &PageRequest,
        id: impl Fn(&T) -> String,
    ) -> Page<T> {
        let start = match &request.cursor {
            None => 0,
            Some(cursor) => items
                .iter()
                .position(|item| id(item) == *cursor)
                .map_or(items.len(), |at| at + 1),
        };
        Self::of_read(items.into_iter().skip(start).collect(), request, id)
    }

    /// A page from a read of up to `limit + 1` items after the cursor: the extra
    /// one says that more follow.
    pub(crate) fn of_read(
        mut items: Vec<T>,
        request: &PageRequest,
        id: impl Fn(&T) -> String,
    ) -> Page<T> {
        let limit = usize::try_from(request.limit).unwrap_or(usize::MAX);
        let more = items.len() > limit;
        items.truncate(limit);
        let next_cursor = if more { items.last().map(id) } else { None };
        Page { items, next_cursor }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(cursor: Option<&str>, limit: u32) -> Page<u32> {
        let request = PageRequest::new(cursor.map(str::to_owned), Some(limit)).unwrap_or_default();
        Page::of_list((1..=5).collect(), &request, u32::to_string)
    }

    #[test]
    fn pages_follow_their_cursor_to_the_end() {
        assert_eq!(
            page(None, 2),
            Page {
                items: vec![1, 2],
                next_cursor: Some("2".into())
            }
        );
        assert_eq!(
            page(Some("2"), 2),
            Page {
                items: vec![3, 4],
                next_cursor: Some("4".into())
            }
        );
        assert_eq!(
            page(Some("4"), 2),
            Page {
                items: vec![5],
                next_cursor: None
            }
        );
        assert_eq!(
            page(Some("5"), 2),
            Page {
                items: vec![],
                next_cursor: None
            }
        );
        assert_eq!(
            page(Some("x"), 2),
            Page {
                items: vec![],
                next_cursor: None
            }
        );
        assert_eq!(
            page(None, 5),
            Page {
                items: vec![1, 2, 3, 4, 5],
                next_cursor: None
            }
        );
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(
            PageRequest::new(None, None).map(|r| r.limit),
            Ok(DEFAULT_LIMIT)
        );
        assert!(PageRequest::new(None, Some(0)).is_err());
        assert!(PageRequest::new(None, Some(251)).is_err());
        assert!(PageRequest::new(None, Some(250)).is_ok());
    }
}
