//! Text shown to a person: what a prompt, a listing or a report prints must be what runs.
//!
//! A command line, a path or a tool argument is the model's text, and the model's text can
//! carry terminal control sequences. `rm -rf x #\r\x1b[2K...git status` printed raw shows a
//! person `git status` while `rm -rf x` is what a `y` approves (red team 4 F3). Every value a
//! person reads is passed through [`for_terminal`] first.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every character that could hide, move or rewrite text on a terminal escaped:
/// C0 controls but the tab (`\n`, `\r`, `\x1b`, ...), DEL, C1 controls, the bidirectional
/// overrides and isolates, zero-width characters, the line and paragraph separators and the
/// byte order mark. A backslash is doubled, so an escape in the output is never ambiguous
/// with one written in the input. Borrowed when nothing needed escaping.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c == '\\' || hides(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if hides(c) && (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if hides(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `c` can hide or rearrange what a terminal shows.
fn hides(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{a}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}'
        | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::for_terminal;

    #[test]
    fn a_line_that_rewrites_the_terminal_is_shown_with_its_controls() {
        let line = "rm -rf x #\r\x1b[2K\x1b[1A\x1b[2K\rgit status";
        let shown = for_terminal(line);
        assert_eq!(shown, "rm -rf x #\\r\\x1b[2K\\x1b[1A\\x1b[2K\\rgit status");
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
    }

    #[test]
    fn invisible_and_reordering_characters_are_named() {
        assert_eq!(
            for_terminal("a\u{202e}b\u{200b}c\u{2066}"),
            "a\\u{202e}b\\u{200b}c\\u{2066}"
        );
        assert_eq!(for_terminal("x\u{85}y\u{7f}"), "x\\x85y\\x7f");
        assert_eq!(for_terminal("one\ntwo"), "one\\ntwo");
    }

    #[test]
    fn plain_text_is_untouched_and_backslashes_stay_unambiguous() {
        assert!(matches!(
            for_terminal("git status\t-s é"),
            std::borrow::Cow::Borrowed(_)
        ));
        // A literal `\r` typed in the input is not shown as the control character.
        assert_eq!(for_terminal("echo \\r"), "echo \\\\r");
    }
}
