//! Question cards: their kinds, their fixed option sets, and how an answer is resolved.
//!
//! The option ids are the choices Hermes itself understands (`once|session|always|deny` for
//! approvals, `once|always|cancel` for slash confirmations), so an answer maps straight
//! onto Hermes's resolvers. Anything a client sends that is not on the card becomes the
//! safe choice: a client can decline, but never forge an approval.

use serde::{Deserialize, Serialize};

use crate::client::PromptAnswer;

/// What a card asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptKind {
    /// Run a shell command the agent wants to run?
    ExecApproval,
    /// Go ahead with a slash command?
    Confirm,
    /// Pick one of the agent's suggested answers, or type one.
    Clarify,
    /// A kind this build does not know, received from a newer server. Clients show a
    /// generic card; the server never sends it.
    #[serde(other)]
    Unknown,
}

/// How a client should draw an option.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OptionStyle {
    /// The suggested choice.
    #[serde(rename = "primary")]
    Primary,
    /// A destructive or refusing choice.
    #[serde(rename = "danger")]
    Danger,
    /// No emphasis: `""` on the wire. Also what an unknown style decodes to.
    #[default]
    #[serde(rename = "", other)]
    Plain,
}

impl OptionStyle {
    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            OptionStyle::Plain => "",
            OptionStyle::Primary => "primary",
            OptionStyle::Danger => "danger",
        }
    }
}

/// One button of a card.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PromptOption {
    /// What the client sends back as `option_id`.
    pub id: String,
    /// The button caption.
    pub label: String,
    /// Always written, as `""` when plain, because the guide's examples show it.
    #[serde(default)]
    pub style: OptionStyle,
}

impl PromptOption {
    fn new(id: impl Into<String>, label: impl Into<String>, style: OptionStyle) -> Self {
        PromptOption {
            id: id.into(),
            label: label.into(),
            style,
        }
    }
}

/// The id of the clarify option that means "I will type my own answer".
pub const CLARIFY_OTHER: &str = "other";

impl PromptKind {
    /// The kinds this build can show, for `capabilities.prompts`.
    pub const ALL: [PromptKind; 3] = [
        PromptKind::ExecApproval,
        PromptKind::Confirm,
        PromptKind::Clarify,
    ];

    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            PromptKind::ExecApproval => "exec_approval",
            PromptKind::Confirm => "confirm",
            PromptKind::Clarify => "clarify",
            PromptKind::Unknown => "unknown",
        }
    }

    /// The buttons of a card of this kind. `choices` are the agent's suggested answers and
    /// are used only by `clarify`, as `c0..cN` followed by `other`.
    pub fn options(&self, choices: &[String]) -> Vec<PromptOption> {
        use OptionStyle::{Danger, Plain, Primary};
        match self {
            PromptKind::ExecApproval => vec![
                PromptOption::new("once", "Allow once", Primary),
                PromptOption::new("session", "Allow for this session", Plain),
                PromptOption::new("always", "Always allow", Plain),
                PromptOption::new("deny", "Deny", Danger),
            ],
            PromptKind::Confirm => vec![
                PromptOption::new("once", "Confirm", Primary),
                PromptOption::new("always", "Always confirm", Plain),
                PromptOption::new("cancel", "Cancel", Plain),
            ],
            PromptKind::Clarify => choices
                .iter()
                .enumerate()
                .map(|(i, c)| PromptOption::new(format!("c{i}"), c.as_str(), Plain))
                .chain(std::iter::once(PromptOption::new(
                    CLARIFY_OTHER,
                    "✏️ Your own answer",
                    Plain,
                )))
                .collect(),
            PromptKind::Unknown => Vec::new(),
        }
    }

    /// The choice that counts when the answer is invalid: one that lets nothing happen.
    pub fn safe_choice(&self) -> &'static str {
        match self {
            PromptKind::ExecApproval => "deny",
            PromptKind::Confirm | PromptKind::Clarify | PromptKind::Unknown => "cancel",
        }
    }

    /// Whether `option_id` is one of this kind's standard options for a card with
    /// `choice_count` clarify choices.
    pub fn is_valid_option(&self, option_id: &str, choice_count: usize) -> bool {
        match self {
            PromptKind::ExecApproval => {
                matches!(option_id, "once" | "session" | "always" | "deny")
            }
            PromptKind::Confirm => matches!(option_id, "once" | "always" | "cancel"),
            PromptKind::Clarify => {
                option_id == CLARIFY_OTHER
                    || clarify_index(option_id).is_some_and(|i| i < choice_count)
            }
            PromptKind::Unknown => false,
        }
    }

    /// The choice that counts: `option_id` if it is one of this kind's options, else
    /// [`Self::safe_choice`]. A missing option counts as invalid.
    pub fn resolve<'a>(&self, option_id: Option<&'a str>, choice_count: usize) -> &'a str {
        match option_id {
            Some(id) if self.is_valid_option(id, choice_count) => id,
            _ => self.safe_choice(),
        }
    }
}

/// `N` for `"cN"` in canonical form (no sign, no leading zeros).
fn clarify_index(option_id: &str) -> Option<usize> {
    let digits = option_id.strip_prefix('c')?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if canonical {
        digits.parse().ok()
    } else {
        None
    }
}

/// A question card (`{"t":"prompt",...}` from the server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptCard {
    /// The card id the answer's `prompt_id` refers to.
    pub id: String,
    /// What is asked.
    pub kind: PromptKind,
    /// The question.
    pub text: String,
    /// The buttons, usually [`PromptKind::options`].
    pub options: Vec<PromptOption>,
    /// The Hermes session the card belongs to (`mobile:<device.id>`).
    pub session: String,
    /// After this the card expires and its answer is `prompt_done{expired:true}`.
    pub timeout_seconds: u32,
    /// For `exec_approval`: the exact command, to show next to the buttons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// For `exec_approval`: why the agent wants to run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The outcome of an answer to a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolution<'a> {
    /// The choice that counts, reported back in `prompt_done.option_id`.
    pub option_id: &'a str,
    /// For `clarify`: the answer for the agent (the chosen option's label, or the typed
    /// text for `other`). `None` for other kinds and for the safe choice.
    pub response: Option<&'a str>,
}

impl PromptCard {
    /// Resolves an answer against the options this card actually offered, so a server
    /// that dropped a button (e.g. `always` when permanent approval is not allowed) gets
    /// that button refused too.
    ///
    /// For `clarify`, `other` (or no `option_id` at all, which the guide allows) needs a
    /// non-blank `text`; without one there is nothing to answer and the card is cancelled.
    pub fn resolve<'a>(&'a self, answer: &'a PromptAnswer) -> Resolution<'a> {
        let safe = Resolution {
            option_id: self.kind.safe_choice(),
            response: None,
        };
        let offered = |id: &str| self.options.iter().find(|o| o.id == id);
        match self.kind {
            PromptKind::Clarify => {
                let text = answer.text.as_deref().filter(|t| !t.trim().is_empty());
                match answer.option_id.as_deref() {
                    None | Some(CLARIFY_OTHER) => match (text, offered(CLARIFY_OTHER)) {
                        (Some(text), Some(other)) => Resolution {
                            option_id: &other.id,
                            response: Some(text),
                        },
                        _ => safe,
                    },
                    Some(id) => match offered(id) {
                        Some(o) => Resolution {
                            option_id: &o.id,
                            response: Some(&o.label),
                        },
                        None => safe,
                    },
                }
            }
            _ => match answer.option_id.as_deref().and_then(offered) {
                Some(o) => Resolution {
                    option_id: &o.id,
                    response: None,
                },
                None => safe,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn answer(option_id: Option<&str>, text: Option<&str>) -> PromptAnswer {
        PromptAnswer {
            prompt_id: "p".into(),
            option_id: option_id.map(Into::into),
            text: text.map(Into::into),
        }
    }

    fn card(kind: PromptKind, choices: &[&str]) -> PromptCard {
        PromptCard {
            id: "p".into(),
            kind,
            text: "?".into(),
            options: kind.options(&strings(choices)),
            session: "mobile:x".into(),
            timeout_seconds: 300,
            command: None,
            description: None,
        }
    }

    #[test]
    fn standard_options_are_valid_and_nothing_else() {
        for kind in PromptKind::ALL {
            for o in kind.options(&strings(&["a", "b"])) {
                assert!(kind.is_valid_option(&o.id, 2), "{kind:?} {}", o.id);
                assert_eq!(kind.resolve(Some(&o.id), 2), o.id);
            }
            assert!(
                kind.options(&[]).iter().any(|o| o.id == kind.safe_choice())
                    || kind == PromptKind::Clarify
            );
        }
        for bad in ["c2", "c01", "c+1", "c-1", "c", "", "ONCE", "cancel "] {
            assert_eq!(PromptKind::Clarify.resolve(Some(bad), 2), "cancel", "{bad}");
        }
        assert_eq!(PromptKind::ExecApproval.resolve(Some("yes"), 0), "deny");
        assert_eq!(PromptKind::ExecApproval.resolve(None, 0), "deny");
        assert_eq!(PromptKind::Confirm.resolve(Some("session"), 0), "cancel");
        assert_eq!(PromptKind::Unknown.resolve(Some("once"), 0), "cancel");
        assert!(PromptKind::Unknown.options(&[]).is_empty());
    }

    #[test]
    fn card_resolution() {
        let c = card(PromptKind::Clarify, &["CSV", "JSON"]);
        let r = |o, t| {
            let a = answer(o, t);
            let res = c.resolve(&a);
            (res.option_id.to_owned(), res.response.map(str::to_owned))
        };
        assert_eq!(r(Some("c1"), None), ("c1".into(), Some("JSON".into())));
        assert_eq!(r(Some("c1"), Some("x")), ("c1".into(), Some("JSON".into())));
        assert_eq!(
            r(Some("other"), Some("XML")),
            ("other".into(), Some("XML".into()))
        );
        assert_eq!(r(None, Some("XML")), ("other".into(), Some("XML".into())));
        assert_eq!(r(Some("other"), Some("  ")), ("cancel".into(), None));
        assert_eq!(r(None, None), ("cancel".into(), None));
        assert_eq!(r(Some("c9"), Some("x")), ("cancel".into(), None));

        let mut exec = card(PromptKind::ExecApproval, &[]);
        let a = answer(Some("always"), None);
        assert_eq!(exec.resolve(&a).option_id, "always");
        exec.options.retain(|o| o.id != "always");
        assert_eq!(exec.resolve(&a).option_id, "deny");
        assert_eq!(exec.resolve(&answer(None, Some("yes"))).option_id, "deny");

        let confirm = card(PromptKind::Confirm, &[]);
        assert_eq!(
            confirm.resolve(&answer(Some("once"), None)).option_id,
            "once"
        );
        assert_eq!(
            confirm.resolve(&answer(Some("deny"), None)).option_id,
            "cancel"
        );
    }

    #[test]
    fn unknown_kinds_and_styles_decode() {
        let k: PromptKind = serde_json::from_str("\"poll\"").unwrap();
        assert_eq!(k, PromptKind::Unknown);
        let s: OptionStyle = serde_json::from_str("\"glowing\"").unwrap();
        assert_eq!(s, OptionStyle::Plain);
        for s in [
            OptionStyle::Plain,
            OptionStyle::Primary,
            OptionStyle::Danger,
        ] {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        for k in PromptKind::ALL {
            assert_eq!(
                serde_json::to_string(&k).unwrap(),
                format!("\"{}\"", k.as_str())
            );
        }
    }
}
