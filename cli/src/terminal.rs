//! What the live views need of a terminal: its size, and lines cut to its
//! width so that redrawing in place works (a wrapped line would push the
//! next frame down).

/// Columns and rows of the terminal on `fd`; `None` if it is not one or
/// does not say.
pub fn size(fd: libc::c_int) -> Option<(usize, usize)> {
    // SAFETY: TIOCGWINSZ fills a winsize on success and touches nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0 && size.ws_row > 0)
        .then(|| (usize::from(size.ws_col), usize::from(size.ws_row)))
}

/// Cuts `text` to fewer than `width` columns (one per char), marking the cut.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() < width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(2)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_the_terminal() {
        assert_eq!(fit("abcdef", 80), "abcdef");
        assert_eq!(fit("abcdef", 5), "abc…");
    }
}
