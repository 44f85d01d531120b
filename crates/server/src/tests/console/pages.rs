//! What the console reads and sends besides the login: the pages, open to all under a
//! strict policy while the data is not; the server page's URLs, QR codes and figures; and
//! uploads that are no image, or cards and details for no device, refused in words.

use serde_json::json;

use super::{demo, req, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_are_open_with_a_strict_policy_and_the_data_is_not() {
    let h = start(demo()).await;
    let index = h.send(req("GET", "/")).await;
    assert_eq!(index.status, 200);
    assert!(index
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(index.text.contains("/console/console.js"));
    let csp = index.header("content-security-policy").unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(index.header("x-content-type-options"), Some("nosniff"));
    let script = h.send(req("GET", "/console/console.js")).await;
    assert_eq!(script.status, 200);
    assert!(script
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    let gadget = h.send(req("GET", "/gadget/")).await;
    assert_eq!(gadget.status, 200);
    assert!(gadget.text.contains("/gadget/gadget.js"));
    assert!(gadget
        .header("content-security-policy")
        .unwrap()
        .contains("ws:"));
    let bare = h.send(req("GET", "/gadget")).await;
    assert_eq!(bare.status, 308);
    assert_eq!(bare.header("location"), Some("/gadget/"));
    for path in [
        "/v1/server",
        "/v1/events",
        "/v1/stats",
        "/v1/qr?for=gadget",
        "/v1/ota/history",
    ] {
        assert_eq!(h.send(req("GET", path)).await.status, 401, "{path}");
    }
    assert_eq!(h.send(req("GET", "/healthz")).await.status, 200);
    h.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_page_urls_qr_codes_and_figures() {
    let h = start(demo()).await;
    let (cookie, _) = h.login().await;
    let server = h
        .send(req("GET", "/v1/server").header("cookie", &cookie))
        .await
        .json();
    let gadget_url = format!("ws://{}/gadget", h.server.gadget_addr());
    assert_eq!(server["urls"]["gadget"], gadget_url.as_str());
    assert_eq!(
        server["urls"]["chat"],
        format!("http://{}/", h.server.mobile_addr()).as_str()
    );
    let qr = h
        .send(req("GET", "/v1/qr?for=gadget").header("cookie", &cookie))
        .await;
    assert_eq!(qr.status, 200);
    assert_eq!(qr.header("content-type"), Some("image/svg+xml"));
    assert!(qr.text.contains("<svg"));
    assert_eq!(qr.text, herald_admin::qr_svg(&gadget_url).unwrap());
    let other = h
        .send(req("GET", "/v1/qr?for=token").header("cookie", &cookie))
        .await;
    assert_eq!(other.status, 400);
    let stats = h
        .send(req("GET", "/v1/stats").header("cookie", &cookie))
        .await
        .json();
    assert_eq!(stats["gadget"]["online"], 0);
    assert!(stats["mobile"]["turns"].is_u64(), "{stats}");
    h.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_that_are_no_image_or_for_no_device_say_so() {
    let h = start(demo()).await;
    let (cookie, csrf) = h.login().await;
    let origin = h.origin();
    let upload = |device: &str, body: &[u8]| {
        req("POST", &format!("/v1/ota/uploads?device={device}"))
            .sent_by_console(&cookie, &csrf, &origin)
            .bytes(body)
    };
    let text = h
        .send(upload(
            "hg-0123456789abcdef",
            b"hello, this is a text file\n",
        ))
        .await;
    assert_eq!(text.status, 422, "{}", text.text);
    assert!(
        text.error().contains("not an ESP-IDF application image"),
        "{}",
        text.text
    );
    let empty = h.send(upload("hg-0123456789abcdef", b"")).await;
    assert_eq!(empty.status, 400);
    let bad_id = h.send(upload("nope", b"x")).await;
    assert_eq!(bad_id.status, 400);
    assert!(bad_id.error().contains("not a gadget id"));
    let too_big = vec![0u8; herald_admin::MAX_UPLOAD + 1];
    let big = h.send(upload("hg-0123456789abcdef", &too_big)).await;
    assert_eq!(big.status, 413, "{}", big.text);
    assert!(big.error().contains("larger than"), "{}", big.text);
    let gone = h
        .send(
            req("POST", "/v1/ota/uploads/u-0000/push")
                .header("cookie", &cookie)
                .header("x-herald-csrf", &csrf)
                .header("sec-fetch-site", "same-origin"),
        )
        .await;
    assert_eq!(gone.status, 404);
    assert!(gone.error().contains("upload the image again"));
    // A card or an action for a device that is not there is refused in words.
    let card = h
        .send(
            req("POST", "/v1/display")
                .sent_by_console(&cookie, &csrf, &origin)
                .json(json!({ "chat": {"platform": "gadget", "id": "hg-0123456789abcdef"}, "title": "Hi" })),
        )
        .await;
    assert!(card.status == 404 || card.status == 409, "{}", card.text);
    assert!(!card.error().is_empty());
    let detail = h
        .send(req("GET", "/v1/devices/hg-0123456789abcdef").header("cookie", &cookie))
        .await;
    assert_eq!(detail.status, 404);
    assert!(detail.error().contains("forgotten"), "{}", detail.text);
    h.server.shutdown().await;
}
