//! Hand-written statements that stay prepared on their connection.
//!
//! `diesel::sql_query` marks its text unsafe to cache, as it may be built at run
//! time, so every call is parsed again, and on PostgreSQL planned again: during a
//! PostgreSQL drain that was a third of the database's CPU. The hot statements
//! written by hand (claims, outcomes, rate windows) have fixed text, so here they
//! are prepared once per connection, like the DSL's queries.
//!
//! A text fixed where it is written ([`statement!`]) is also found in the
//! connection's statement cache by a type of its own, as the DSL's queries are;
//! one given as a `&'static str` ([`prepared`]), which a caller may choose at
//! run time, is found by its text, which diesel writes out and hashes at every
//! call to look it up (docs/PERFORMANCE.md).
//!
//! The text numbers its parameters PostgreSQL's way, `$1`, `$2`…, for both
//! backends: each `$N` becomes a placeholder of the connection's dialect (`$k` or
//! `?`) bound to the N-th value, so a parameter may appear more than once.

use std::marker::PhantomData;

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{HasSqlType, Untyped};

/// A statement of fixed text and its parameters, a tuple of [`Bind`]s; `Key`
/// says how its connection's statement cache finds it.
#[derive(Debug)]
pub(crate) struct Prepared<Binds, Key = ByText> {
    sql: &'static str,
    binds: Binds,
    key: PhantomData<Key>,
}

/// How a connection's statement cache finds a [`Prepared`].
pub(crate) trait CacheKey: 'static {
    /// By the type itself, which stands for one text; else by the text.
    const BY_TYPE: bool;
}

/// Found by its text, written out at each call: a text given at run time.
#[derive(Debug)]
pub(crate) enum ByText {}

impl CacheKey for ByText {
    const BY_TYPE: bool = false;
}

/// A statement of fixed text; give it its parameters with [`Prepared::binds`].
/// Its text may be chosen at run time, so the statement cache finds it by its
/// text: for a text written where it is used, [`statement!`] is cheaper.
pub(crate) fn prepared(sql: &'static str) -> Prepared<()> {
    Prepared {
        sql,
        binds: (),
        key: PhantomData,
    }
}

/// A statement whose text, a constant, is written here: the statement cache
/// finds it by a type made for this text alone, without writing it out.
macro_rules! statement {
    ($sql:expr $(,)?) => {{
        const STATEMENT_TEXT: &str = $sql;
        /// The cache key of this text alone.
        enum ThisText {}
        impl $crate::prepared::CacheKey for ThisText {
            const BY_TYPE: bool = true;
        }
        $crate::prepared::Prepared::<(), ThisText>::keyed(STATEMENT_TEXT)
    }};
}
pub(crate) use statement;

impl<Key: CacheKey> Prepared<(), Key> {
    /// For [`statement!`], which makes `Key` for `sql` alone.
    pub(crate) const fn keyed(sql: &'static str) -> Self {
        Prepared {
            sql,
            binds: (),
            key: PhantomData,
        }
    }

    pub(crate) fn binds<Binds>(self, binds: Binds) -> Prepared<Binds, Key> {
        Prepared {
            sql: self.sql,
            binds,
            key: PhantomData,
        }
    }
}

/// One parameter: its value and its SQL type.
#[derive(Debug)]
pub(crate) struct Bind<SqlType, Value> {
    value: Value,
    sql_type: PhantomData<SqlType>,
}

pub(crate) fn bind<SqlType, Value>(value: Value) -> Bind<SqlType, Value> {
    Bind {
        value,
        sql_type: PhantomData,
    }
}

/// The parameters of a [`Prepared`], pushed by number.
pub(crate) trait Binds<DB: Backend> {
    /// Pushes parameter `number` (from 1) at the current place in the statement.
    fn push<'b>(&'b self, number: usize, out: &mut AstPass<'_, 'b, DB>) -> QueryResult<()>;
}

impl<DB: Backend> Binds<DB> for () {
    fn push<'b>(&'b self, number: usize, _: &mut AstPass<'_, 'b, DB>) -> QueryResult<()> {
        Err(no_such_parameter(number))
    }
}

fn no_such_parameter(number: impl std::fmt::Display) -> diesel::result::Error {
    diesel::result::Error::QueryBuilderError(format!("no parameter ${number} is bound").into())
}

/// `Binds` for tuples of `Bind`s, numbered from 1 in tuple order.
macro_rules! tuple_binds {
    ($($number:literal: $index:tt $SqlType:ident $Value:ident),+) => {
        impl<DB, $($SqlType, $Value),+> Binds<DB> for ($(Bind<$SqlType, $Value>,)+)
        where
            DB: Backend $(+ HasSqlType<$SqlType>)+,
            $($Value: ToSql<$SqlType, DB>,)+
        {
            fn push<'b>(&'b self, number: usize, out: &mut AstPass<'_, 'b, DB>) -> QueryResult<()> {
                match number {
                    $($number => out.push_bind_param::<$SqlType, $Value>(&self.$index.value),)+
                    _ => Err(no_such_parameter(number)),
                }
            }
        }
    };
}

tuple_binds!(1: 0 S1 V1);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7, 8: 7 S8 V8);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7, 8: 7 S8 V8, 9: 8 S9 V9);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7, 8: 7 S8 V8, 9: 8 S9 V9, 10: 9 S10 V10);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7, 8: 7 S8 V8, 9: 8 S9 V9, 10: 9 S10 V10, 11: 10 S11 V11);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7, 8: 7 S8 V8, 9: 8 S9 V9, 10: 9 S10 V10, 11: 10 S11 V11, 12: 11 S12 V12);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7, 8: 7 S8 V8, 9: 8 S9 V9, 10: 9 S10 V10, 11: 10 S11 V11, 12: 11 S12 V12,
    13: 12 S13 V13);
tuple_binds!(1: 0 S1 V1, 2: 1 S2 V2, 3: 2 S3 V3, 4: 3 S4 V4, 5: 4 S5 V5, 6: 5 S6 V6,
    7: 6 S7 V7, 8: 7 S8 V8, 9: 8 S9 V9, 10: 9 S10 V10, 11: 10 S11 V11, 12: 11 S12 V12,
    13: 12 S13 V13, 14: 13 S14 V14);

impl<DB: Backend, B: Binds<DB>, Key> QueryFragment<DB> for Prepared<B, Key> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        // Unlike `sql_query`, no `unsafe_to_cache_prepared`: the connection's cache is
        // keyed by the text, which is fixed per call site.
        let mut rest = self.sql;
        while let Some(dollar) = rest.find('$') {
            let digits = rest[dollar + 1..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(rest.len() - dollar - 1, |end| end);
            if digits == 0 {
                // A `$` of the SQL itself (a JSON path): text.
                out.push_sql(&rest[..=dollar]);
                rest = &rest[dollar + 1..];
                continue;
            }
            out.push_sql(&rest[..dollar]);
            let text = &rest[dollar + 1..=dollar + digits];
            // Only a number too big for `usize` fails to parse: no tuple binds that many.
            let number = text.parse().map_err(|_| no_such_parameter(text))?;
            self.binds.push(number, &mut out)?;
            rest = &rest[dollar + 1 + digits..];
        }
        out.push_sql(rest);
        Ok(())
    }
}

impl<B, Key: CacheKey> QueryId for Prepared<B, Key> {
    type QueryId = Key;
    const HAS_STATIC_QUERY_ID: bool = Key::BY_TYPE;
}

impl<B, Key> Query for Prepared<B, Key> {
    type SqlType = Untyped;
}

// Run through diesel-async as a rule; SQLite work done in one blocking call (see
// `Store::use_api_keys`) and the tests run them on a plain connection.
impl<B, Key, Conn> diesel::RunQueryDsl<Conn> for Prepared<B, Key> {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use diesel::connection::{Connection as _, InstrumentationEvent};
    use diesel::pg::Pg;
    use diesel::sql_types::{Integer, Text};
    use diesel::sqlite::{Sqlite, SqliteConnection};
    use diesel::{RunQueryDsl as _, debug_query};

    use super::{bind, prepared};

    type Prepares = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    /// A SQLite connection, and the text of each statement it prepares (a miss of
    /// its statement cache), in order.
    fn noting_what_it_prepares() -> (SqliteConnection, Prepares) {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        let prepares = Prepares::default();
        let seen = std::sync::Arc::clone(&prepares);
        conn.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::CacheQuery { sql, .. } = event {
                seen.lock().unwrap().push(sql.to_owned());
            }
        });
        (conn, prepares)
    }

    #[test]
    fn numbered_parameters_become_each_dialects_placeholders() {
        let query = prepared("SELECT $1, json_extract('[7]', '$[0]'), $2, $1")
            .binds((bind::<Integer, _>(5), bind::<Text, _>("five")));
        assert_eq!(
            debug_query::<Pg, _>(&query).to_string(),
            r#"SELECT $1, json_extract('[7]', '$[0]'), $2, $3 -- binds: [5, "five", 5]"#
        );
        assert_eq!(
            debug_query::<Sqlite, _>(&query).to_string(),
            r#"SELECT ?, json_extract('[7]', '$[0]'), ?, ? -- binds: [5, "five", 5]"#
        );
    }

    #[test]
    fn a_written_text_is_found_by_a_type_of_its_own() {
        use diesel::query_builder::QueryId;
        fn query_id<Q: QueryId>(_: &Q) -> Option<std::any::TypeId> {
            Q::query_id()
        }
        let first = query_id(&statement!("SELECT 1"));
        let second = query_id(&statement!("SELECT 1"));
        assert!(first.is_some() && second.is_some());
        assert_ne!(first, second, "each text written has a key of its own");
        assert_eq!(
            query_id(&prepared("SELECT 1")),
            None,
            "a given text is found by itself"
        );

        let (mut conn, cached) = noting_what_it_prepares();
        #[derive(diesel::QueryableByName, Debug, PartialEq)]
        struct Sum {
            #[diesel(sql_type = Integer)]
            sum: i32,
        }
        for n in 0..3 {
            let sum: Sum = statement!("SELECT $1 + $1 AS sum")
                .binds((bind::<Integer, _>(n),))
                .get_result(&mut conn)
                .unwrap();
            assert_eq!(sum, Sum { sum: 2 * n });
        }
        assert_eq!(
            *cached.lock().unwrap(),
            ["SELECT ? + ? AS sum"],
            "prepared once"
        );
    }

    #[test]
    fn a_parameter_without_a_value_is_an_error_not_a_panic() {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        let query = prepared("SELECT $1 + $2").binds((bind::<Integer, _>(1),));
        let error = query.execute(&mut conn).unwrap_err();
        assert!(error.to_string().contains("no parameter $2"), "{error}");
    }

    #[test]
    fn statements_are_kept_prepared_unlike_sql_query() {
        let (mut conn, cached) = noting_what_it_prepares();
        for n in 0..3 {
            prepared("SELECT $1")
                .binds((bind::<Integer, _>(n),))
                .execute(&mut conn)
                .unwrap();
            diesel::sql_query("SELECT 2").execute(&mut conn).unwrap();
        }
        assert_eq!(
            *cached.lock().unwrap(),
            ["SELECT ?"],
            "prepared once, sql_query never"
        );
    }
}
