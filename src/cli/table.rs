//! Table cells by display width: a CJK character or an emoji takes two terminal columns,
//! so padding and cutting by `char` count misaligns every column after one.

use unicode_width::UnicodeWidthStr;

/// How many terminal columns `text` takes once its control characters are escaped.
pub fn width(text: &str) -> usize {
    gantry::console::app::escape(text).width()
}

/// `text` (control characters escaped) in exactly `width` columns: cut with `…` if wider
/// (as the console's tables cut), padded with spaces if narrower.
pub fn cell(text: &str, width: usize) -> String {
    let text = gantry::console::app::escape(text);
    let cut = gantry::console::table::cut(&text, width);
    let pad = width.saturating_sub(cut.width());
    format!("{cut}{}", " ".repeat(pad))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_as_wide_as_asked_whatever_the_script() {
        for (text, width, want) in [
            ("train", 8, "train   "),
            ("训练任务", 10, "训练任务  "),
            ("训练任务-大模型", 10, "训练任务-…"),
            ("训练任务大模型", 10, "训练任务… "),
            ("🚀 launch", 6, "🚀 la…"),
            ("a\tb", 6, "a\\tb  "),
        ] {
            let got = cell(text, width);
            assert_eq!(got, want);
            assert_eq!(got.width(), width, "{got:?}");
        }
    }
}
