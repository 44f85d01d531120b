//! What [`strip_markdown`](super::strip_markdown) keeps and drops, construct by construct,
//! including the cut-off forms of a streaming preview.

use super::strip_markdown as strip;

#[test]
fn plain_text_is_unchanged() {
    assert_eq!(strip("Hello, world."), "Hello, world.");
    assert_eq!(strip(""), "");
    assert_eq!(strip("line one\nline two\n"), "line one\nline two\n");
    assert_eq!(strip("Grüße aus Köln 🙂"), "Grüße aus Köln 🙂");
}

#[test]
fn think_blocks_are_removed() {
    assert_eq!(strip("<think>secret plan</think>Answer"), "Answer");
    assert_eq!(strip("A<think>x\ny\n</think>B<think>z</think>C"), "ABC");
    assert_eq!(strip("<THINK>x</Think>ok"), "ok");
    assert_eq!(strip("<thinking>x</thinking>ok"), "ok");
}

#[test]
fn unterminated_think_hides_the_rest() {
    assert_eq!(strip("Sure.<think>Let me **reason** about"), "Sure.");
    assert_eq!(strip("<think>"), "");
}

#[test]
fn stray_think_closer_hides_what_came_before() {
    assert_eq!(
        strip("reasoning here\n</think>\n\nThe answer"),
        "\n\nThe answer"
    );
}

#[test]
fn think_tag_cut_at_the_end_is_hidden() {
    assert_eq!(strip("Hello <thin"), "Hello");
    assert_eq!(strip("Hello </thi"), "Hello");
    assert_eq!(strip("Hello <"), "Hello <");
    assert_eq!(strip("a <b"), "a <b");
}

#[test]
fn fenced_code_keeps_its_content() {
    assert_eq!(
        strip("Run:\n```bash\nls -la *.txt\necho $HOME_DIR\n```\nDone"),
        "Run:\nls -la *.txt\necho $HOME_DIR\nDone"
    );
    assert_eq!(strip("~~~\n**not bold**\n~~~"), "**not bold**");
    // Unterminated (streaming): the rest is code.
    assert_eq!(strip("```py\nx = a_b * 2"), "x = a_b * 2");
    // A longer fence is only closed by an equally long one.
    assert_eq!(strip("````\n```\n````"), "```");
}

#[test]
fn fenced_code_in_lists_and_quotes() {
    assert_eq!(strip("- step\n  ```\n  make\n  ```"), "* step\nmake");
    assert_eq!(strip("> ```\n> code\n> ```"), "code");
}

#[test]
fn inline_code_keeps_text() {
    assert_eq!(strip("Use `cargo test` now"), "Use cargo test now");
    assert_eq!(strip("``a ` b``"), "a ` b");
    assert_eq!(strip("`` `x` ``"), "`x`");
    assert_eq!(strip("```ls -la```"), "ls -la");
    assert_eq!(strip("`**raw**` and `[x](y)`"), "**raw** and [x](y)");
}

#[test]
fn unbalanced_backticks_are_hidden() {
    assert_eq!(strip("Run `cargo bu"), "Run cargo bu");
    assert_eq!(strip("a `` b ` c"), "a  b  c");
}

#[test]
fn links_keep_their_text() {
    assert_eq!(
        strip("See [the docs](https://x.io/a_(b)) now"),
        "See the docs now"
    );
    assert_eq!(strip("[**Bold** link](http://x \"Title\")"), "Bold link");
    assert_eq!(strip("[ref link][1] and [other][]"), "ref link and other");
    assert_eq!(strip("[](https://x.io)"), "https://x.io");
    assert_eq!(strip("[1]: https://example.com\nText"), "Text");
    assert_eq!(strip("[^1]: A footnote"), "[^1]: A footnote");
}

#[test]
fn lone_brackets_stay() {
    assert_eq!(strip("array[0] = 1"), "array[0] = 1");
    assert_eq!(strip("[unclosed (x)"), "[unclosed (x)");
    assert_eq!(strip("a ]( b"), "a ]( b");
    assert_eq!(strip("[a](b"), "[a](b");
    assert_eq!(strip("[x] done"), "[x] done");
}

#[test]
fn images_keep_alt_text() {
    assert_eq!(strip("![A cat](cat.png) sleeping"), "A cat sleeping");
    assert_eq!(strip("![](spacer.gif)x"), "x");
    assert_eq!(strip("Wow!"), "Wow!");
    assert_eq!(strip("Hi![x"), "Hi![x");
}

#[test]
fn autolinks_lose_brackets() {
    assert_eq!(
        strip("Go to <https://x.io/a_b_>."),
        "Go to https://x.io/a_b_."
    );
    assert_eq!(strip("Mail <me@x.io>"), "Mail me@x.io");
    assert_eq!(strip("if a <b and c> d"), "if a <b and c> d");
}

#[test]
fn bare_urls_are_not_emphasis() {
    assert_eq!(
        strip("see https://x.io/_a_/*b* now"),
        "see https://x.io/_a_/*b* now"
    );
    assert_eq!(strip("**https://x.io**"), "https://x.io");
}

#[test]
fn headings_lose_hashes() {
    assert_eq!(strip("# Title"), "Title");
    assert_eq!(strip("### **Step 2** ###"), "Step 2");
    assert_eq!(strip("# Learn C#"), "Learn C#");
    assert_eq!(strip("#hashtag"), "#hashtag");
    assert_eq!(strip("####### seven"), "####### seven");
    assert_eq!(strip("Title\n====="), "Title");
}

#[test]
fn blockquotes_lose_markers() {
    assert_eq!(strip("> quoted"), "quoted");
    assert_eq!(strip("> > nested\n>> tight"), "nested\ntight");
    assert_eq!(strip("> # Head\n> - item"), "Head\n* item");
    assert_eq!(strip(">= 5 is fine"), ">= 5 is fine");
    assert_eq!(strip("a > b"), "a > b");
}

#[test]
fn horizontal_rules_are_removed() {
    assert_eq!(strip("a\n---\nb"), "a\n\nb");
    assert_eq!(strip("a\n***\nb\n___\nc"), "a\n\nb\n\nc");
    assert_eq!(strip("* * *"), "");
    assert_eq!(strip("- - -"), "");
    assert_eq!(strip("--"), "--");
}

#[test]
fn tables_become_rows() {
    assert_eq!(
        strip("| City | Pop |\n|---|:--:|\n| Paris | 2.1M |\n| **Rome** | 2.8M |"),
        "City - Pop\nParis - 2.1M\nRome - 2.8M"
    );
    assert_eq!(strip("a | b\n--- | ---\n1 | 2"), "a - b\n1 - 2");
    assert_eq!(strip("| x | | z |"), "x - z");
    assert_eq!(strip("| a \\| b | `x \\| y` |"), "a | b - x | y");
    // A pipe in prose is not a table.
    assert_eq!(strip("yes | no"), "yes | no");
}

#[test]
fn emphasis_markers_are_removed() {
    assert_eq!(strip("*a* **b** ***c*** _d_ __e__ ~~f~~"), "a b c d e f");
    assert_eq!(strip("**bold _and italic_ text**"), "bold and italic text");
    assert_eq!(strip("un*frigging*believable"), "unfriggingbelievable");
    assert_eq!(strip("**unclosed bold"), "unclosed bold");
    assert_eq!(strip("end of bold**"), "end of bold");
}

#[test]
fn emphasis_lookalikes_survive() {
    assert_eq!(
        strip("my_var_name and __init__.py"),
        "my_var_name and init.py"
    );
    assert_eq!(strip("snake_case_name"), "snake_case_name");
    assert_eq!(strip("2 * 3 * 4 = 24"), "2 * 3 * 4 = 24");
    assert_eq!(strip("2**10 = 1024"), "2**10 = 1024");
    assert_eq!(strip("a ** b"), "a ** b");
    assert_eq!(strip("~5 min, ~~ and ~~~"), "~5 min, ~~ and ~~~");
    assert_eq!(strip("price*"), "price*");
}

#[test]
fn bullets_are_normalised() {
    assert_eq!(strip("- one\n* two\n+ three"), "* one\n* two\n* three");
    assert_eq!(
        strip("- top\n  - nested\n\t+ tab"),
        "* top\n  * nested\n\t* tab"
    );
    assert_eq!(strip("- **Bold**: text"), "* Bold: text");
    assert_eq!(strip("- [ ] task"), "* [ ] task");
    assert_eq!(strip("-5 degrees\n+1 from me"), "-5 degrees\n+1 from me");
    assert_eq!(strip("*emphasis* first"), "emphasis first");
}

#[test]
fn numbered_lists_keep_numbers() {
    assert_eq!(
        strip("1. First\n2. **Second**\n10) Tenth"),
        "1. First\n2. Second\n10) Tenth"
    );
    assert_eq!(strip("   3. indented"), "   3. indented");
    assert_eq!(strip("2024. was a year"), "2024. was a year");
}

#[test]
fn html_tags_become_breaks_or_vanish() {
    assert_eq!(
        strip("one<br>two<br/>three<BR />four"),
        "one\ntwo\nthree\nfour"
    );
    assert_eq!(strip("<b>bold</b> <span class=\"x\">s</span>"), "bold s");
    assert_eq!(strip("<p>para</p><p>next</p>"), "\npara\n\nnext");
    assert_eq!(strip("line<br>"), "line");
    assert_eq!(strip("Vec<String> and a<b"), "Vec<String> and a<b");
}

#[test]
fn escapes_are_unescaped() {
    assert_eq!(strip(r"\*not emphasis\*"), "*not emphasis*");
    assert_eq!(strip(r"\_ \# \[x\](y) \\ \` \|"), r"_ # [x](y) \ ` |");
    assert_eq!(strip(r"C:\Users\me"), r"C:\Users\me");
    assert_eq!(strip("hard break\\\nnext"), "hard break\nnext");
}

#[test]
fn entities_are_decoded() {
    assert_eq!(
        strip("Tom &amp; Jerry &lt;3 &#233;&#x2019;"),
        "Tom & Jerry <3 é’"
    );
    assert_eq!(strip("a&nbsp;b &bogus; & c &#0;"), "a b &bogus; & c");
    assert_eq!(strip("AT&T;"), "AT&T;");
}

#[test]
fn crlf_input() {
    assert_eq!(strip("# Hi\r\n- a\r\n"), "Hi\n* a\n");
}
