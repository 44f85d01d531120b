// react-native-webview's WebView, as much as the example uses.
import type { ComponentType, Ref } from "react";

export interface WebViewHandle {
  injectJavaScript(script: string): void;
}
export const WebView: ComponentType<{
  ref?: Ref<WebViewHandle>;
  source: { uri: string } | { html: string };
  style?: Record<string, string | number>;
  originWhitelist?: string[];
  javaScriptEnabled?: boolean;
}>;
