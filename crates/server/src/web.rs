//! The pages the phone listener serves to browsers: the browser chat at `/` and the
//! avatar page at [`AVATAR_PATH`].
//!
//! They are built from `web/src` (TypeScript on the SDK, bundled with esbuild from the
//! lockfile) into `web/dist`, which is committed and compiled in here, so `herald serve`
//! needs no files at run time and no CDN. `web/build.mjs --check` (run by
//! `sdk/typescript/run-tests.sh`) fails when `web/dist` is not what its source builds to.

pub(crate) use crate::http::Page;

/// Where the avatar page is served; `ready.avatar_url` names it when
/// `MOBILE_AVATAR_URL` is unset. Relative, so it resolves against whatever address the
/// phone used (clients resolve it against the WebSocket's URL over HTTP(S)).
pub(crate) const AVATAR_PATH: &str = "/avatar.html";

const HTML: &str = "text/html; charset=utf-8";

/// Served by exact path on the phone listener, beside its WebSocket path.
pub(crate) static MOBILE_PAGES: &[Page] = &[
    Page {
        path: "/",
        content_type: HTML,
        body: include_bytes!("../../../web/dist/index.html"),
    },
    Page {
        path: "/index.html",
        content_type: HTML,
        body: include_bytes!("../../../web/dist/index.html"),
    },
    Page {
        path: "/chat.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../web/dist/chat.js"),
    },
    Page {
        path: "/chat.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../../web/dist/chat.css"),
    },
    Page {
        path: AVATAR_PATH,
        content_type: HTML,
        body: include_bytes!("../../../web/dist/avatar.html"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn page(path: &str) -> Option<&'static Page> {
        MOBILE_PAGES.iter().find(|p| p.path == path)
    }

    #[test]
    fn paths_are_unique_and_absolute() {
        for (i, p) in MOBILE_PAGES.iter().enumerate() {
            assert!(p.path.starts_with('/'), "{}", p.path);
            assert!(!p.body.is_empty(), "{} is empty", p.path);
            assert!(
                MOBILE_PAGES[..i].iter().all(|q| q.path != p.path),
                "{} twice",
                p.path
            );
        }
    }

    #[test]
    fn what_the_chat_loads_is_served_and_nothing_comes_from_elsewhere() {
        let index = std::str::from_utf8(page("/").map_or(&[][..], |p| p.body)).unwrap();
        for asset in ["/chat.js", "/chat.css", AVATAR_PATH] {
            assert!(index.contains(asset), "index.html refers to {asset}");
            assert!(page(asset).is_some(), "{asset} is served");
        }
        // Not a single absolute URL: every asset comes from herald, and nothing is fetched
        // from another host, not even by script.
        for p in MOBILE_PAGES {
            let text = String::from_utf8_lossy(p.body);
            for absolute in ["http://", "https://", "src=\"//", "href=\"//", "url(//"] {
                assert!(!text.contains(absolute), "{} names {absolute}", p.path);
            }
        }
    }

    #[test]
    fn the_avatar_page_keeps_the_contract() {
        let avatar = String::from_utf8_lossy(page(AVATAR_PATH).map_or(&[][..], |p| p.body));
        for name in ["window.hermesAvatar", "setState", "speak", "setVolume"] {
            assert!(avatar.contains(name), "{name}");
        }
    }
}
