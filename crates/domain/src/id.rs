use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use std::sync::{Mutex, PoisonError};

use ulid::{Generator, ULID_LEN, Ulid};

use crate::{Error, Result};

/// What an [`Id`] names; fixes the id's type prefix.
pub trait IdKind {
    /// Written before the ULID, with an underscore: `ws` gives `ws_01J…`.
    const PREFIX: &'static str;
    /// For error messages: "workspace", "webhook", …
    const NAME: &'static str;
}

static GENERATOR: Mutex<Generator> = Mutex::new(Generator::new());

/// A ULID with a type prefix, such as `ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R`.
///
/// The prefix makes an id say what it names, and the type parameter keeps a
/// webhook id from being passed where a workspace id is meant.
pub struct Id<K> {
    ulid: Ulid,
    kind: PhantomData<fn() -> K>,
}

impl<K: IdKind> Id<K> {
    /// A new id, sortable by creation time. Ids made by one process are strictly
    /// increasing, even within a millisecond, so "oldest first" has no ties.
    pub fn generate() -> Self {
        let mut generator = GENERATOR.lock().unwrap_or_else(PoisonError::into_inner);
        let ulid = generator
            .generate()
            .unwrap_or_else(|overflow| overflow.commit_overflow_increment());
        Self::from_ulid(ulid)
    }

    /// The id of kind `K` of this ULID.
    pub fn from_ulid(ulid: Ulid) -> Self {
        Id {
            ulid,
            kind: PhantomData,
        }
    }

    /// The lowest id made at or after `at`: ids made before `at` are exactly those
    /// that sort below it (as text too: a ULID's time comes first).
    pub fn first_at(at: crate::Timestamp) -> Self {
        Self::from_ulid(Ulid::from_parts(
            u64::try_from(at.unix_millis()).unwrap_or(0),
            0,
        ))
    }

    /// When it was made, to the millisecond (a ULID starts with its time);
    /// the end of year 9999 for a ULID's time beyond it.
    pub fn made_at(&self) -> crate::Timestamp {
        let millis = i64::try_from(self.ulid.timestamp_ms()).unwrap_or(i64::MAX);
        crate::Timestamp::EPOCH.plus_millis(millis)
    }

    /// The ULID under the prefix.
    pub fn ulid(&self) -> Ulid {
        self.ulid
    }

    /// The ids of this kind as a regular expression (ECMA 262 and Python alike),
    /// for the OpenAPI documents: the prefix, `_`, and a ULID in its one
    /// spelling (Crockford's base32 in upper case, at most 128 bits).
    pub fn pattern() -> String {
        format!("^{}$", Self::unanchored_pattern())
    }

    /// [`Id::pattern`] without its anchors, to build a larger pattern of.
    pub fn unanchored_pattern() -> String {
        format!("{}_[0-7][0-9A-HJKMNP-TV-Z]{{25}}", K::PREFIX)
    }
}

impl<K: IdKind> FromStr for Id<K> {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = || Error::InvalidId {
            kind: K::NAME,
            prefix: K::PREFIX,
            value: s.to_owned(),
        };
        let rest = s
            .strip_prefix(K::PREFIX)
            .and_then(|rest| rest.strip_prefix('_'))
            .ok_or_else(invalid)?;
        // Ulid::from_string also takes lower case and values past 128 bits; ids have
        // one spelling only (they are compared as text in the database).
        match Ulid::from_string(rest) {
            Ok(ulid) if ulid.array_to_str(&mut [0; ULID_LEN]) == rest => Ok(Self::from_ulid(ulid)),
            _ => Err(invalid()),
        }
    }
}

/// Room for an id's text: a prefix of up to 13 characters, `_` and the ULID.
const TEXT_ROOM: usize = 40;

impl<K: IdKind> Id<K> {
    /// The id's text (`ws_01J…`) in `buffer`: written whole, so that a
    /// formatter or a JSON writer takes it in one piece (ids are in every
    /// answer and every request's log line).
    fn text<'buffer>(&self, buffer: &'buffer mut [u8; TEXT_ROOM]) -> &'buffer str {
        const { assert!(K::PREFIX.len() + 1 + ULID_LEN <= TEXT_ROOM) };
        let prefix = K::PREFIX.len();
        buffer[..prefix].copy_from_slice(K::PREFIX.as_bytes());
        buffer[prefix] = b'_';
        let mut ulid = [0; ULID_LEN];
        buffer[prefix + 1..prefix + 1 + ULID_LEN]
            .copy_from_slice(self.ulid.array_to_str(&mut ulid).as_bytes());
        // ASCII throughout: a prefix is, and so is Crockford's base32.
        std::str::from_utf8(&buffer[..prefix + 1 + ULID_LEN]).unwrap_or_default()
    }
}

impl<K: IdKind> fmt::Display for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text(&mut [0; TEXT_ROOM]))
    }
}

impl<K: IdKind> fmt::Debug for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

// Written by hand: derives would demand `K: Clone`, `K: PartialEq`, … of the marker types.
impl<K> Clone for Id<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Id<K> {}
impl<K> PartialEq for Id<K> {
    fn eq(&self, other: &Self) -> bool {
        self.ulid == other.ulid
    }
}
impl<K> Eq for Id<K> {}
impl<K> std::hash::Hash for Id<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.ulid.hash(state);
    }
}
impl<K> PartialOrd for Id<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Id<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.ulid.cmp(&other.ulid)
    }
}

impl<K: IdKind> serde::Serialize for Id<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.text(&mut [0; TEXT_ROOM]))
    }
}

impl WebhookId {
    /// The webhook a listener is: the same ULID, so either id finds the other.
    pub fn of_listener(listener: ListenerId) -> WebhookId {
        WebhookId::from_ulid(listener.ulid())
    }

    /// The listener this webhook is, when it is one ([`WebhookSource::Listener`](crate::WebhookSource)).
    pub fn as_listener(self) -> ListenerId {
        ListenerId::from_ulid(self.ulid())
    }
}

macro_rules! id_kinds {
    ($($(#[$doc:meta])* $alias:ident = $marker:ident($prefix:literal, $name:literal);)*) => {$(
        #[derive(Debug)]
        pub enum $marker {}
        impl IdKind for $marker {
            const PREFIX: &'static str = $prefix;
            const NAME: &'static str = $name;
        }
        $(#[$doc])*
        pub type $alias = Id<$marker>;
    )*};
}

id_kinds! {
    /// `ws_…`
    WorkspaceId = WorkspaceKind("ws", "workspace");
    /// `acc_…`
    AccountId = AccountKind("acc", "account");
    /// `key_…`
    ApiKeyId = ApiKeyKind("key", "API key");
    /// `wh_…`
    WebhookId = WebhookKind("wh", "webhook");
    /// `lsn_…`: a listener, which is the webhook of the same ULID
    /// ([`WebhookId::of_listener`]).
    ListenerId = ListenerKind("lsn", "listener");
    /// `evt_…`
    EventId = EventKind("evt", "event");
    /// `adm_…`
    AdminTokenId = AdminTokenKind("adm", "admin token");
    /// `req_…`: a request, in logs and `X-Request-Id`.
    RequestId = RequestKind("req", "request");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        let id = WorkspaceId::generate();
        let text = id.to_string();
        assert!(text.starts_with("ws_"));
        assert_eq!(text.len(), 3 + 26);
        assert_eq!(text.parse::<WorkspaceId>(), Ok(id));
        let known = Ulid::from_string("01JD3Z6Q8T4X2K9V7B5N1M0C3R").unwrap();
        let key = ApiKeyId::from_ulid(known);
        assert_eq!(key.to_string(), "key_01JD3Z6Q8T4X2K9V7B5N1M0C3R");
        assert_eq!(
            serde_json::to_string(&key).unwrap(),
            "\"key_01JD3Z6Q8T4X2K9V7B5N1M0C3R\""
        );
    }

    #[test]
    fn refuses_other_prefixes_and_malformed_ulids() {
        let wh = WebhookId::generate().to_string();
        let err = wh.parse::<WorkspaceId>().unwrap_err();
        assert!(err.to_string().contains("workspace id"), "{err}");
        for bad in [
            "",
            "ws",
            "ws_",
            "ws01JD3Z6Q8T4X2K9V7B5N1M0C3R",
            "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3",
            "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3RR",
            "ws_01jd3z6q8t4x2k9v7b5n1m0c3r",
            "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3!",
            "WS_01JD3Z6Q8T4X2K9V7B5N1M0C3R",
            "ws_81JD3Z6Q8T4X2K9V7B5N1M0C3R", // overflows 128 bits
        ] {
            assert!(bad.parse::<WorkspaceId>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn an_id_says_when_it_was_made() {
        let at = crate::Timestamp::parse_iso("2026-12-05T10:04:05.123Z").unwrap();
        assert_eq!(EventId::first_at(at).made_at(), at);
        let before = crate::Timestamp::now();
        let made = EventId::generate().made_at();
        assert!(before <= made && made <= crate::Timestamp::now());
        // A ULID's time reaches past year 9999, which a timestamp does not.
        let last = EventId::from_ulid(Ulid::from_parts(u64::MAX >> 16, 0));
        assert_eq!(
            last.made_at(),
            crate::Timestamp::parse_iso("9999-12-31T23:59:59.999Z").unwrap()
        );
    }

    #[test]
    fn generated_ids_sort_by_creation_even_within_a_millisecond() {
        let ids: Vec<EventId> = (0..1000).map(|_| EventId::generate()).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].to_string() < pair[1].to_string());
        }
    }
}
