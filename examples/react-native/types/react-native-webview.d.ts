// react-native-webview's WebView, as much as the example uses. As in the real package it is
// a class, so a ref to it is typed `WebView` and has `injectJavaScript`.
import type { Component } from "react";

export interface WebViewProps {
  source: { uri: string } | { html: string };
  style?: Record<string, string | number>;
  originWhitelist?: string[];
  javaScriptEnabled?: boolean;
}
export class WebView extends Component<WebViewProps> {
  injectJavaScript(script: string): void;
}
