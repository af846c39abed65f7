//! Hand-written statements that stay prepared on their connection.
//!
//! `diesel::sql_query` marks its text unsafe to cache, as it may be built at run
//! time, so every call is parsed again, and on PostgreSQL planned again: during a
//! PostgreSQL drain that was a third of the database's CPU. The hot statements
//! written by hand (claims, outcomes, rate windows) have fixed text, so here they
//! are prepared once per connection, like the DSL's queries.
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

/// A statement of fixed text and its parameters, a tuple of [`Bind`]s.
#[derive(Debug)]
pub(crate) struct Prepared<Binds> {
    sql: &'static str,
    binds: Binds,
}

/// A statement of fixed text; give it its parameters with [`Prepared::binds`].
pub(crate) fn prepared(sql: &'static str) -> Prepared<()> {
    Prepared { sql, binds: () }
}

impl Prepared<()> {
    pub(crate) fn binds<Binds>(self, binds: Binds) -> Prepared<Binds> {
        Prepared {
            sql: self.sql,
            binds,
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

impl<DB: Backend, B: Binds<DB>> QueryFragment<DB> for Prepared<B> {
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

impl<B> QueryId for Prepared<B> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<B> Query for Prepared<B> {
    type SqlType = Untyped;
}

// Run through diesel-async as a rule; SQLite work done in one blocking call (see
// `Store::use_api_keys`) and the tests run them on a plain connection.
impl<B, Conn> diesel::RunQueryDsl<Conn> for Prepared<B> {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use diesel::connection::{Connection as _, InstrumentationEvent};
    use diesel::pg::Pg;
    use diesel::sql_types::{Integer, Text};
    use diesel::sqlite::{Sqlite, SqliteConnection};
    use diesel::{RunQueryDsl as _, debug_query};

    use super::{bind, prepared};

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
    fn a_parameter_without_a_value_is_an_error_not_a_panic() {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        let query = prepared("SELECT $1 + $2").binds((bind::<Integer, _>(1),));
        let error = query.execute(&mut conn).unwrap_err();
        assert!(error.to_string().contains("no parameter $2"), "{error}");
    }

    #[test]
    fn statements_are_kept_prepared_unlike_sql_query() {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        let cached = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = std::sync::Arc::clone(&cached);
        conn.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::CacheQuery { sql, .. } = event {
                seen.lock().unwrap().push(sql.to_owned());
            }
        });
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
