// A minimal avatar page for a WebView, with the contract every avatar page keeps:
//   window.hermesAvatar = { setState(state), speak(text), setVolume(level) }
// Use it when `ready` names no avatar_url (MOBILE_AVATAR_URL unset and an older herald),
// or to ship your own. Herald's own page (served at /avatar.html) is web/src/avatar.html.

import type { AvatarState } from "@herald/mobile";

export type { AvatarState };

export const avatarHtml = `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  html, body { margin: 0; height: 100%; background: #1d2433; color: #e8ecf4; font: 15px system-ui, sans-serif; }
  body { display: flex; flex-direction: column; align-items: center; justify-content: center; gap: 10px; }
  .face { width: 120px; height: 120px; border-radius: 50%; background: #f4c95d; position: relative;
          box-shadow: 0 0 0 calc(4px + var(--level, 0) * 16px) rgba(122, 162, 255, 0.35); transition: box-shadow 80ms; }
  .eye { position: absolute; top: 38px; width: 12px; height: 16px; border-radius: 50%; background: #2b2118; }
  .eye.l { left: 34px; } .eye.r { right: 34px; }
  .mouth { position: absolute; left: 38px; right: 38px; bottom: 28px; height: 6px; border-radius: 3px; background: #2b2118; }
  body[data-state="thinking"] .eye { top: 30px; }
  body[data-state="thinking"] .face { animation: pulse 1.4s infinite; }
  body[data-state="speaking"] .mouth { animation: talk 0.3s infinite alternate; }
  @keyframes pulse { 50% { transform: scale(1.05); } }
  @keyframes talk { from { height: 4px; } to { height: 18px; } }
</style></head>
<body data-state="idle">
  <div class="face"><div class="eye l"></div><div class="eye r"></div><div class="mouth"></div></div>
  <div id="state" role="status">idle</div>
  <div id="line"></div>
<script>
  window.hermesAvatar = {
    setState: function (s) {
      if (["idle", "thinking", "speaking"].indexOf(s) < 0) return;
      document.body.dataset.state = s;
      document.getElementById("state").textContent = s;
    },
    speak: function (text) { document.getElementById("line").textContent = String(text); },
    setVolume: function (level) {
      document.body.style.setProperty("--level", String(Math.max(0, Math.min(1, Number(level) || 0))));
    }
  };
</script>
</body></html>`;

/** The script for `webView.injectJavaScript` that calls the avatar; arguments are JSON-quoted. */
export function avatarCall(method: "setState" | "speak" | "setVolume", arg: AvatarState | string | number): string {
  return `window.hermesAvatar && window.hermesAvatar.${method}(${JSON.stringify(arg)}); true;`;
}
