//! The benchmark's error type: a message saying what was being done, and the
//! errno or I/O error that stopped it.
//!
//! Unlike the library's `Errno`, a benchmark error carries context ("uvfs
//! creat-clo: openat(run1/t0-17)") because it ends the run and is shown to a
//! person.

use std::fmt;

/// A benchmark failure: what was being done, and why it failed.
///
/// Displayed as `context: cause`, e.g.
/// `kernel tree: read(include/stdio.h): EIO: Input/output error`.
#[derive(Debug)]
pub struct Error {
    /// What was being done when the error happened.
    context: String,
    /// The underlying error, if any.
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result` with the benchmark's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with only a message (no underlying cause).
    pub fn msg(context: impl fmt::Display) -> Self {
        Self {
            context: context.to_string(),
            source: None,
        }
    }

    /// An error caused by `source` while doing `context`.
    pub fn new(
        context: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            context: context.to_string(),
            source: Some(Box::new(source)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {}", self.context, source),
            None => f.write_str(&self.context),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Adds context to a failed call, turning its error into an [`Error`].
pub trait Context<T> {
    /// On error, wraps it with the message `context()` (built only on error,
    /// so hot loops pay nothing for it).
    ///
    /// # Errors
    ///
    /// Returns the wrapped error if `self` is an error.
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T, E> Context<T> for std::result::Result<T, E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    #[inline]
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T> {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(Error::new(context(), e)),
        }
    }
}
