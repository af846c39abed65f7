//! `column IN (values)` as one bind parameter, so the statement is prepared once
//! per connection whatever the number of values: diesel's `eq_any` writes one
//! placeholder per value on SQLite, a new statement (parsed and planned again) for
//! every batch size. SQLite reads the values from a JSON array (`json_each`);
//! PostgreSQL from a text array (`= ANY`), behind a subquery so that one plan
//! serves every call.

use diesel::expression::{AppearsOnTable, Expression, ValidGrouping, is_aggregate};
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Bool, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryResult, SelectableExpression};

/// `column IN (values)` for a text column.
#[derive(Debug, Clone)]
pub(crate) struct TextIn<C> {
    column: C,
    values: Vec<String>,
    /// The values as a JSON array of strings, for SQLite; empty for one value.
    json: String,
}

pub(crate) fn text_in<C>(column: C, values: Vec<String>) -> TextIn<C> {
    // One value is bound as itself (see the SQLite fragment).
    let json = if values.len() == 1 {
        String::new()
    } else {
        json_string_array(&values)
    };
    TextIn {
        column,
        values,
        json,
    }
}

impl<C: Expression<SqlType = Text>> Expression for TextIn<C> {
    type SqlType = Bool;
}

impl<C: AppearsOnTable<QS>, QS: ?Sized> AppearsOnTable<QS> for TextIn<C> where TextIn<C>: Expression {}

impl<C: SelectableExpression<QS>, QS: ?Sized> SelectableExpression<QS> for TextIn<C> where
    TextIn<C>: AppearsOnTable<QS>
{
}

impl<C> ValidGrouping<()> for TextIn<C> {
    type IsAggregate = is_aggregate::Never;
}

impl<C> QueryId for TextIn<C> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<C: QueryFragment<Sqlite>> QueryFragment<Sqlite> for TextIn<C> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        self.column.walk_ast(out.reborrow())?;
        // One value, the usual batch of a quiet hour or of one busy workspace: a
        // plain comparison. The list form fills a temporary b-tree with the
        // values at every call (PERFORMANCE.md). Either text is prepared once.
        if let [value] = self.values.as_slice() {
            out.push_sql(" = ");
            return out.push_bind_param::<Text, _>(value);
        }
        out.push_sql(" IN (SELECT value FROM json_each(");
        out.push_bind_param::<Text, _>(&self.json)?;
        out.push_sql("))");
        Ok(())
    }
}

impl<C: QueryFragment<Pg>> QueryFragment<Pg> for TextIn<C> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.column.walk_ast(out.reborrow())?;
        // The array behind a subquery: the planner cannot see its length even when
        // planning for the values bound, so the plan made for any values costs the
        // same as one made for these, and PostgreSQL keeps it. With a bare `$1` it
        // planned every call again for the values (a custom plan), which cost
        // several times the lookup itself.
        out.push_sql(" = ANY((SELECT ");
        out.push_bind_param::<Array<Text>, _>(&self.values)?;
        out.push_sql(")::text[])");
        Ok(())
    }
}

/// `["a","b"]`, each string escaped as JSON requires.
pub(crate) fn json_string_array<S: AsRef<str>>(values: &[S]) -> String {
    json_array(values, |json, value| push_json_string(json, value.as_ref()))
}

/// A JSON array of `items`, each written by `push_item`: how a batch travels to
/// SQLite as one bind parameter.
pub(crate) fn json_array<T>(items: &[T], mut push_item: impl FnMut(&mut String, &T)) -> String {
    let mut json = String::from("[");
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            json.push(',');
        }
        push_item(&mut json, item);
    }
    json.push(']');
    json
}

/// A row of a batch as a JSON array: its text columns, then one integer
/// (`["a","b",7]`), the shape every SQLite batch statement reads with `json_each`.
pub(crate) fn push_json_row(json: &mut String, texts: &[&str], number: i64) {
    use std::fmt::Write as _;
    json.push('[');
    for text in texts {
        push_json_string(json, text);
        json.push(',');
    }
    let _ = write!(json, "{number}]");
}

pub(crate) fn push_json_string(json: &mut String, value: &str) {
    json.push('"');
    for c in value.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            c if u32::from(c) < 0x20 => json.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => json.push(c),
        }
    }
    json.push('"');
}

/// One field of every row, as PostgreSQL takes a batch column (an array parameter);
/// text is borrowed, not copied.
pub(crate) fn column<'a, R, V>(rows: &'a [R], field: impl Fn(&'a R) -> V) -> Vec<V> {
    rows.iter().map(field).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_texts_then_a_number() {
        let mut json = String::new();
        push_json_row(&mut json, &["a", "b\"c"], -7);
        assert_eq!(json, r#"["a","b\"c",-7]"#);
    }

    #[test]
    fn strings_are_escaped_as_json() {
        assert_eq!(json_string_array::<&str>(&[]), "[]");
        assert_eq!(
            json_string_array(&["ws_1", "a\"b\\c\nd"]),
            r#"["ws_1","a\"b\\c\u000ad"]"#
        );
    }
}
