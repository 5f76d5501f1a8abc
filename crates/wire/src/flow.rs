//! Flow-control windows (RFC 9113 §6.9) with checked arithmetic: a window never passes
//! 2^31-1 (§6.9.1), and what is sent against it is taken only while it lasts.

use crate::frame::MAX_WINDOW;

/// What a peer may still send on a stream or a connection. A SETTINGS_INITIAL_WINDOW_SIZE
/// lowered can take a stream's below zero (RFC 9113 §6.9.2); nothing takes it past 2^31-1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Window(i64);

/// Why a window could not change as asked; the window is left as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// An increment or a new initial size would take it past 2^31-1, or a new initial size
    /// below -(2^31-1), where no peer's windows can take it (FLOW_CONTROL_ERROR).
    #[error("flow-control window out of range (over 2^31-1)")]
    Overflow,
    /// More was sent than the window allows (FLOW_CONTROL_ERROR).
    #[error("more sent than the flow-control window allows")]
    Exceeded,
}

impl Window {
    /// Every window's size until SETTINGS say otherwise (RFC 9113 §6.5.2, §6.9.2).
    pub const DEFAULT: Window = Window(crate::frame::DEFAULT_WINDOW);

    /// A window of `size`, a SETTINGS_INITIAL_WINDOW_SIZE (checked at most 2^31-1 where the
    /// setting is read, `frame::check_settings`).
    pub fn new(size: u32) -> Window {
        Window(i64::from(size).min(MAX_WINDOW))
    }

    /// What may be sent now: nothing while the window is at or below zero.
    pub fn available(self) -> usize {
        self.0.max(0) as usize
    }

    /// The window as it stands, below zero after an initial size lowered.
    pub fn get(self) -> i64 {
        self.0
    }

    /// An initial size (SETTINGS_INITIAL_WINDOW_SIZE) set to `size`: how far every window
    /// counted from it moves (RFC 9113 §6.9.2).
    pub fn resize(&mut self, size: u32) -> i64 {
        let new = Window::new(size);
        let delta = new.0 - self.0;
        *self = new;
        delta
    }

    /// A WINDOW_UPDATE of `n` (or the window's share of a SETTINGS change raised).
    pub fn increase(&mut self, n: u32) -> Result<(), WindowError> {
        self.adjust(i64::from(n))
    }

    /// The window moved by the change of an initial size, `delta` either way (RFC 9113
    /// §6.9.2): past 2^31-1 is an error; below zero is allowed, down to -(2^31-1) (all of the
    /// largest window spent, then the initial size lowered to 0).
    pub fn adjust(&mut self, delta: i64) -> Result<(), WindowError> {
        match self.0.checked_add(delta) {
            Some(w) if (-MAX_WINDOW..=MAX_WINDOW).contains(&w) => {
                self.0 = w;
                Ok(())
            }
            _ => Err(WindowError::Overflow),
        }
    }

    /// `n` octets sent against the window: an error, the window unchanged, when it had less.
    pub fn consume(&mut self, n: usize) -> Result<(), WindowError> {
        match i64::try_from(n) {
            Ok(n) if n <= self.0 => {
                self.0 -= n;
                Ok(())
            }
            _ => Err(WindowError::Exceeded),
        }
    }

    /// `n` octets given back that [`Window::consume`] took (a frame the receiver consumed
    /// and granted again at once): the window as it was, never past 2^31-1.
    pub fn refund(&mut self, n: usize) {
        let n = i64::try_from(n).unwrap_or(MAX_WINDOW);
        self.0 = self.0.saturating_add(n).min(MAX_WINDOW);
    }

    /// How much more than `initial` this window was granted (zero when it was granted no
    /// more, or spent some).
    pub fn granted_past(self, initial: Window) -> u32 {
        (self.0 - initial.0).clamp(0, MAX_WINDOW) as u32
    }
}

impl Default for Window {
    fn default() -> Window {
        Window::DEFAULT
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_grows_to_two_to_the_31_less_one_and_no_further() {
        let mut w = Window::DEFAULT;
        w.increase((MAX_WINDOW - 65_535) as u32).unwrap();
        assert_eq!(w.get(), MAX_WINDOW);
        assert_eq!(w.increase(1), Err(WindowError::Overflow));
        assert_eq!(w.get(), MAX_WINDOW, "unchanged by the error");
        assert_eq!(Window::new(u32::MAX).get(), MAX_WINDOW);
    }

    #[test]
    fn what_is_sent_is_taken_only_while_it_lasts() {
        let mut w = Window::new(10);
        w.consume(4).unwrap();
        assert_eq!(w.available(), 6);
        assert_eq!(w.consume(7), Err(WindowError::Exceeded));
        assert_eq!(w.available(), 6, "unchanged by the error");
        w.consume(6).unwrap();
        assert_eq!(w.available(), 0);
        assert_eq!(w.consume(1), Err(WindowError::Exceeded));
        assert_eq!(w.consume(usize::MAX), Err(WindowError::Exceeded));
        w.consume(0).unwrap();
        w.refund(6);
        assert_eq!(w.available(), 6);
        w.refund(usize::MAX);
        assert_eq!(
            w.get(),
            MAX_WINDOW,
            "a refund never passes the largest window"
        );
    }

    #[test]
    fn an_initial_size_lowered_takes_a_window_below_zero() {
        // RFC 9113 §6.9.2: 65,535 spent 60,000, then the initial size lowered to 1,000.
        let mut w = Window::DEFAULT;
        w.consume(60_000).unwrap();
        w.adjust(1_000 - 65_535).unwrap();
        assert_eq!(w.get(), 1_000 - 60_000);
        assert_eq!(w.available(), 0);
        assert_eq!(w.consume(1), Err(WindowError::Exceeded));
        w.increase(60_000).unwrap();
        assert_eq!(w.available(), 1_000);
        assert_eq!(w.adjust(i64::MAX), Err(WindowError::Overflow));
        assert_eq!(w.adjust(i64::MIN), Err(WindowError::Overflow));
    }

    #[test]
    fn granted_past_counts_only_what_was_added() {
        let mut w = Window::new(100);
        assert_eq!(w.granted_past(Window::new(100)), 0);
        w.increase(50).unwrap();
        assert_eq!(w.granted_past(Window::new(100)), 50);
        w.consume(120).unwrap();
        assert_eq!(w.granted_past(Window::new(100)), 0);
    }

    #[test]
    fn an_initial_size_resized_says_how_far_every_window_moves() {
        let mut initial = Window::DEFAULT;
        assert_eq!(initial.resize(65_535 + 100), 100);
        assert_eq!(initial.get(), 65_635);
        assert_eq!(initial.resize(0), -65_635);
        assert_eq!(initial.resize(u32::MAX), MAX_WINDOW, "capped at 2^31-1");
    }
}
