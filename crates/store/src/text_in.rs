//! `column IN (values)` as one bind parameter, so the statement is prepared once
//! per connection whatever the number of values: diesel's `eq_any` writes one
//! placeholder per value on SQLite, a new statement (parsed and planned again) for
//! every batch size. SQLite reads the values from a JSON array (`json_each`), or
//! compares with the one value there is; PostgreSQL reads them from a text array
//! (`= ANY`), behind a subquery so that one plan serves every call.
//!
//! The shape of the SQLite text (one value or a list) is a type ([`One`],
//! [`List`]), so that a statement holding a [`TextIn`] keeps a static query id:
//! diesel then finds its prepared statement by type, where it would otherwise
//! write out the whole statement's SQL and hash it at every call to look it up
//! (docs/PERFORMANCE.md). [`by_shape!`] picks the type by the number of values.

use diesel::expression::{AppearsOnTable, Expression, ValidGrouping, is_aggregate};
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Bool, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryResult, SelectableExpression};

/// One value: SQLite compares with it (`= ?`).
#[derive(Debug, Clone)]
pub(crate) struct One(String);

/// Any number of values: SQLite reads them from a JSON array.
#[derive(Debug, Clone)]
pub(crate) struct List {
    values: Vec<String>,
    /// The values as a JSON array of strings, SQLite's one bind.
    json: String,
}

impl List {
    /// Any number of values in the list shape; on its own for a statement only
    /// PostgreSQL runs, whose text is the same for any number of values.
    pub(crate) fn of(values: Vec<String>) -> Self {
        List {
            json: json_string_array(&values),
            values,
        }
    }
}

/// The values of a [`TextIn`], in one shape: how SQLite reads them.
pub(crate) trait Shape: 'static {
    /// The values, as PostgreSQL's array takes them.
    fn values(&self) -> &[String];

    /// The SQLite text after the column, with its bind.
    fn walk_sqlite<'b>(&'b self, out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()>;
}

impl Shape for One {
    fn values(&self) -> &[String] {
        std::slice::from_ref(&self.0)
    }

    // One value, the usual batch of a quiet hour or of one busy workspace: a
    // plain comparison. The list form fills a temporary b-tree with the values
    // at every call (PERFORMANCE.md).
    fn walk_sqlite<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql(" = ");
        out.push_bind_param::<Text, _>(&self.0)
    }
}

impl Shape for List {
    fn values(&self) -> &[String] {
        &self.values
    }

    fn walk_sqlite<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql(" IN (SELECT value FROM json_each(");
        out.push_bind_param::<Text, _>(&self.json)?;
        out.push_sql("))");
        Ok(())
    }
}

/// Values in the shape their number wants; [`by_shape!`] opens it.
#[derive(Debug)]
pub(crate) enum Shaped {
    One(One),
    List(List),
}

impl Shaped {
    pub(crate) fn of(mut values: Vec<String>) -> Self {
        match values.pop() {
            Some(value) if values.is_empty() => Shaped::One(One(value)),
            last => {
                values.extend(last);
                Shaped::List(List::of(values))
            }
        }
    }
}

/// Evaluates `$body` with `$values` (a `Vec<String>`) as `$name`, in the
/// [`Shape`] their number wants: `$body` is written once and compiled for each
/// shape, so that each statement it runs has one text per type.
macro_rules! by_shape {
    ($values:expr, |$name:ident| $body:expr) => {
        match $crate::text_in::Shaped::of($values) {
            $crate::text_in::Shaped::One($name) => $body,
            $crate::text_in::Shaped::List($name) => $body,
        }
    };
}
pub(crate) use by_shape;

/// `column IN (values)` for a text column.
#[derive(Debug, Clone)]
pub(crate) struct TextIn<C, S> {
    column: C,
    values: S,
}

pub(crate) fn text_in<C, S: Shape>(column: C, values: S) -> TextIn<C, S> {
    TextIn { column, values }
}

impl<C: Expression<SqlType = Text>, S> Expression for TextIn<C, S> {
    type SqlType = Bool;
}

impl<C: AppearsOnTable<QS>, S, QS: ?Sized> AppearsOnTable<QS> for TextIn<C, S> where
    TextIn<C, S>: Expression
{
}

impl<C: SelectableExpression<QS>, S, QS: ?Sized> SelectableExpression<QS> for TextIn<C, S> where
    TextIn<C, S>: AppearsOnTable<QS>
{
}

impl<C, S> ValidGrouping<()> for TextIn<C, S> {
    type IsAggregate = is_aggregate::Never;
}

impl<C: QueryId, S: Shape> QueryId for TextIn<C, S> {
    type QueryId = (C::QueryId, S);
    const HAS_STATIC_QUERY_ID: bool = C::HAS_STATIC_QUERY_ID;
}

impl<C: QueryFragment<Sqlite>, S: Shape> QueryFragment<Sqlite> for TextIn<C, S> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        self.column.walk_ast(out.reborrow())?;
        self.values.walk_sqlite(out)
    }
}

impl<C: QueryFragment<Pg>, S: Shape> QueryFragment<Pg> for TextIn<C, S> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.column.walk_ast(out.reborrow())?;
        // The array behind a subquery: the planner cannot see its length even when
        // planning for the values bound, so the plan made for any values costs the
        // same as one made for these, and PostgreSQL keeps it. With a bare `$1` it
        // planned every call again for the values (a custom plan), which cost
        // several times the lookup itself.
        out.push_sql(" = ANY((SELECT ");
        out.push_bind_param::<Array<Text>, _>(self.values.values())?;
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
    use std::any::TypeId;

    use diesel::debug_query;
    use diesel::prelude::*;

    use super::*;
    use crate::models::api_key::keys_by_hash;
    use crate::models::webhook::webhooks_of;

    /// The id a SQLite connection's statement cache finds the query by.
    fn query_id<Q: QueryId + QueryFragment<Sqlite>>(_: &Q) -> Option<TypeId> {
        Q::query_id()
    }

    fn values(n: usize) -> Vec<String> {
        (0..n).map(|n| format!("h{n}")).collect()
    }

    #[test]
    fn each_shape_is_a_statement_found_by_its_type() {
        let ids = |n| by_shape!(values(n), |hashes| query_id(&keys_by_hash!(hashes)));
        let (one, two, three) = (ids(1), ids(2), ids(3));
        assert!(one.is_some(), "the key lookup has a static query id");
        assert_ne!(one, two, "one value and a list are two statements");
        assert_eq!(two, three, "a list of any length is one statement");
        let reads = by_shape!(values(1), |ids| query_id(&webhooks_of!(ids ids)));
        assert!(reads.is_some(), "so has the key check's read of webhooks");
    }

    #[test]
    fn each_shape_writes_its_own_text() {
        let sql = |n| {
            by_shape!(values(n), |hashes| debug_query::<Sqlite, _>(
                &keys_by_hash!(hashes)
            )
            .to_string())
        };
        assert!(sql(1).contains("`key_hash` = ?"), "{}", sql(1));
        assert!(
            sql(2).contains("IN (SELECT value FROM json_each(?))"),
            "{}",
            sql(2)
        );
        assert!(sql(0).contains(r#"binds: ["[]"]"#), "{}", sql(0));
        let pg = debug_query::<Pg, _>(&keys_by_hash!(List::of(values(1)))).to_string();
        assert!(pg.contains("= ANY((SELECT $1)::text[])"), "{pg}");
    }

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
