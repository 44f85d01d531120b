//! The pages herald serves to browsers: on the phone listener the browser chat at `/`
//! and the avatar page at [`AVATAR_PATH`]; on the admin listener the owner's console at
//! `/` and the in-tab gadget at `/gadget/` ([`ADMIN_PAGES`]).
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

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Served by exact path on the admin listener, beside the API (see `admin/console.rs`).
pub(crate) static ADMIN_PAGES: &[Page] = &[
    Page {
        path: "/",
        content_type: HTML,
        body: include_bytes!("../../../web/dist/console/index.html"),
    },
    Page {
        path: "/console/console.js",
        content_type: JS,
        body: include_bytes!("../../../web/dist/console/console.js"),
    },
    Page {
        path: "/console/console.css",
        content_type: CSS,
        body: include_bytes!("../../../web/dist/console/console.css"),
    },
    Page {
        path: "/gadget/",
        content_type: HTML,
        body: include_bytes!("../../../web/dist/gadget/index.html"),
    },
    Page {
        path: "/gadget/index.html",
        content_type: HTML,
        body: include_bytes!("../../../web/dist/gadget/index.html"),
    },
    Page {
        path: "/gadget/gadget.js",
        content_type: JS,
        body: include_bytes!("../../../web/dist/gadget/gadget.js"),
    },
    Page {
        path: "/gadget/mic-worklet.js",
        content_type: JS,
        body: include_bytes!("../../../web/dist/gadget/mic-worklet.js"),
    },
    Page {
        path: "/gadget/gadget.css",
        content_type: CSS,
        body: include_bytes!("../../../web/dist/gadget/gadget.css"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn page(path: &str) -> Option<&'static Page> {
        MOBILE_PAGES.iter().find(|p| p.path == path)
    }

    fn admin_page(path: &str) -> Option<&'static Page> {
        ADMIN_PAGES.iter().find(|p| p.path == path)
    }

    #[test]
    fn paths_are_unique_and_absolute() {
        for pages in [MOBILE_PAGES, ADMIN_PAGES] {
            for (i, p) in pages.iter().enumerate() {
                assert!(p.path.starts_with('/'), "{}", p.path);
                assert!(!p.body.is_empty(), "{} is empty", p.path);
                assert!(
                    pages[..i].iter().all(|q| q.path != p.path),
                    "{} twice",
                    p.path
                );
            }
        }
        // The API keeps its own namespace.
        assert!(ADMIN_PAGES
            .iter()
            .all(|p| !p.path.starts_with("/v1/") && p.path != "/metrics"));
    }

    #[test]
    fn what_the_console_and_the_gadget_load_is_served_and_nothing_comes_from_elsewhere() {
        let text =
            |path: &str| String::from_utf8_lossy(admin_page(path).map_or(&[][..], |p| p.body));
        for (html, assets) in [
            ("/", ["/console/console.js", "/console/console.css"]),
            ("/gadget/", ["/gadget/gadget.js", "/gadget/gadget.css"]),
        ] {
            let index = text(html);
            for asset in assets {
                assert!(index.contains(asset), "{html} refers to {asset}");
                assert!(admin_page(asset).is_some(), "{asset} is served");
            }
        }
        for p in ADMIN_PAGES {
            let body = String::from_utf8_lossy(p.body);
            for absolute in ["http://", "https://", "src=\"//", "href=\"//", "url(//"] {
                assert!(!body.contains(absolute), "{} names {absolute}", p.path);
            }
        }
        // The console never keeps the admin token in the page's storage.
        assert!(!text("/console/console.js").contains("localStorage"));
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
