//! The pages herald serves to browsers: on the phone listener the browser chat at `/`
//! and the avatar page at [`AVATAR_PATH`]; on the admin listener the owner's console at
//! `/` and the in-tab gadget at `/gadget/` ([`ADMIN_PAGES`]).
//!
//! The chat installs as an app: its web app manifest and icons are served beside it, and
//! `/sw.js`, a service worker whose scope is the whole phone port, keeps the chat's files
//! so it opens (not connected) when herald cannot be reached. Every answer says
//! `Cache-Control: no-cache`, as browsers need for the worker's script to notice an
//! update; the worker itself never keeps the WebSocket or anything but these files.
//!
//! They are built from `web/src` (TypeScript on the SDK, bundled with esbuild from the
//! lockfile) into `web/dist`, which is committed and compiled in here, so `herald serve`
//! needs no files at run time and no CDN. `web/build.mjs --check` (run by
//! `sdk/typescript/run-tests.sh`) fails when `web/dist` is not what its source builds to.

/// A static page a listener serves to plain `GET` requests.
pub struct Page {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

/// `GET /healthz` on every listener: alive, and which version; nothing else.
pub const HEALTH: &str = concat!(
    r#"{"status":"ok","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// Where the avatar page is served; `ready.avatar_url` names it when
/// `MOBILE_AVATAR_URL` is unset. Relative, so it resolves against whatever address the
/// phone used (clients resolve it against the WebSocket's URL over HTTP(S)).
pub const AVATAR_PATH: &str = "/avatar.html";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const PNG: &str = "image/png";

/// Served by exact path on the phone listener, beside its WebSocket path.
pub static MOBILE_PAGES: &[Page] = &[
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
        content_type: JS,
        body: include_bytes!("../../../web/dist/chat.js"),
    },
    Page {
        path: "/chat.css",
        content_type: CSS,
        body: include_bytes!("../../../web/dist/chat.css"),
    },
    Page {
        path: AVATAR_PATH,
        content_type: HTML,
        body: include_bytes!("../../../web/dist/avatar.html"),
    },
    Page {
        path: "/manifest.webmanifest",
        content_type: "application/manifest+json",
        body: include_bytes!("../../../web/dist/manifest.webmanifest"),
    },
    Page {
        path: "/sw.js",
        content_type: JS,
        body: include_bytes!("../../../web/dist/sw.js"),
    },
    Page {
        path: "/icons/icon-192.png",
        content_type: PNG,
        body: include_bytes!("../../../web/dist/icons/icon-192.png"),
    },
    Page {
        path: "/icons/icon-512.png",
        content_type: PNG,
        body: include_bytes!("../../../web/dist/icons/icon-512.png"),
    },
    Page {
        path: "/icons/icon-maskable-512.png",
        content_type: PNG,
        body: include_bytes!("../../../web/dist/icons/icon-maskable-512.png"),
    },
    Page {
        path: "/icons/apple-touch-icon.png",
        content_type: PNG,
        body: include_bytes!("../../../web/dist/icons/apple-touch-icon.png"),
    },
];

/// Served by exact path on the admin listener, beside the API (see `herald-admin`'s console).
pub static ADMIN_PAGES: &[Page] = &[
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
    Page {
        path: "/gadget/device.wasm",
        content_type: "application/wasm",
        body: include_bytes!("../../../web/dist/gadget/device.wasm"),
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

    fn text(path: &str) -> String {
        String::from_utf8_lossy(page(path).map_or(&[][..], |p| p.body)).into_owned()
    }

    #[test]
    fn the_chat_names_its_manifest_icons_and_worker_and_each_is_served() {
        let index = text("/");
        for link in [
            r#"<link rel="manifest" href="/manifest.webmanifest">"#,
            r#"href="/icons/apple-touch-icon.png""#,
            r#"<meta name="theme-color""#,
        ] {
            assert!(index.contains(link), "index.html has {link}");
        }
        assert!(text("/chat.js").contains(r#"register("/sw.js""#));
        let manifest: serde_json::Value =
            serde_json::from_str(&text("/manifest.webmanifest")).expect("the manifest is JSON");
        assert_eq!(manifest["name"], "Herald");
        assert_eq!(manifest["display"], "standalone");
        let icons = manifest["icons"].as_array().expect("icons");
        let mut purposes = Vec::new();
        for icon in icons {
            let src = icon["src"].as_str().unwrap();
            let served = page(src).unwrap_or_else(|| panic!("{src} is served"));
            assert_eq!(served.content_type, PNG);
            assert!(
                served.body.starts_with(b"\x89PNG\r\n\x1a\n"),
                "{src} is a PNG"
            );
            // The size the manifest says is the size in the PNG's header.
            let width = u32::from_be_bytes(served.body[16..20].try_into().unwrap());
            assert_eq!(icon["sizes"], format!("{width}x{width}"), "{src}");
            purposes.push((width, icon["purpose"].as_str().unwrap().to_owned()));
        }
        for wanted in [(192, "any"), (512, "any"), (512, "maskable")] {
            assert!(
                purposes.contains(&(wanted.0, wanted.1.to_owned())),
                "{wanted:?}"
            );
        }
    }

    #[test]
    fn the_worker_keeps_every_file_the_chat_loads_and_nothing_else() {
        let worker = text("/sw.js");
        // build.mjs writes the list in as a JSON array of paths.
        let from = worker.find("HERALD_ASSETS").expect("the list of files");
        let list = &worker[from..];
        let list = &list[list.find('[').unwrap()..=list.find(']').unwrap()];
        let kept: Vec<String> = serde_json::from_str(list).unwrap();
        let mut expected: Vec<&str> = MOBILE_PAGES
            .iter()
            .map(|p| p.path)
            .filter(|path| !["/index.html", "/sw.js"].contains(path))
            .collect();
        expected.sort_unstable();
        let mut kept_sorted: Vec<&str> = kept.iter().map(String::as_str).collect();
        kept_sorted.sort_unstable();
        assert_eq!(kept_sorted, expected);
        assert!(worker.contains("herald-chat-"), "a versioned cache");
        assert!(!worker.contains("/ws\""), "the WebSocket is never kept");
    }

    #[test]
    fn the_avatar_page_keeps_the_contract() {
        let avatar = String::from_utf8_lossy(page(AVATAR_PATH).map_or(&[][..], |p| p.body));
        for name in ["window.hermesAvatar", "setState", "speak", "setVolume"] {
            assert!(avatar.contains(name), "{name}");
        }
    }
}
