//! Reading an error's chain of causes. HTTP clients wrap what went wrong in layers that say
//! only "error sending request"; users need the innermost words, or a particular layer (a TLS
//! error) to say what to do about it.

use std::error::Error;

/// The innermost cause of `e` (itself if it has none): what actually went wrong.
pub fn root_cause(e: &dyn Error) -> String {
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

/// The first cause of `e` (itself included) that is a `T`.
pub fn cause<'a, T: Error + 'static>(e: &'a (dyn Error + 'static)) -> Option<&'a T> {
    let mut at = Some(e);
    while let Some(err) = at {
        if let Some(t) = err.downcast_ref::<T>() {
            return Some(t);
        }
        // An io::Error's source() skips the error it wraps (rustls's, inside hyper's).
        let wrapped = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn Error + 'static));
        at = wrapped.or_else(|| err.source());
    }
    None
}
