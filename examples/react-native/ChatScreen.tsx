// A minimal chat screen on @herald/mobile: replies streamed in place, cards as buttons,
// the typing line, and the avatar in a WebView driven by avatar frames. Keep the token
// in the Keychain/Keystore (e.g. react-native-keychain) and pass it in.

import { useEffect, useRef, useState } from "react";
import { Button, FlatList, StyleSheet, Text, TextInput, View } from "react-native";
import { WebView } from "react-native-webview";
import { CLARIFY_OTHER, HeraldClient, HeraldError, type Card, type Reply } from "@herald/mobile";

import { avatarCall, avatarHtml } from "./avatarHtml";

export interface ChatScreenProps {
  /** e.g. wss://agent.example.com/ws */
  url: string;
  token: string;
  /** Made once per installation and kept (AsyncStorage). */
  deviceId: string;
}

type Row =
  | { key: string; kind: "me"; text: string }
  | { key: string; kind: "agent"; reply: Reply }
  | { key: string; kind: "card"; card: Card; answered?: string };

export function ChatScreen({ url, token, deviceId }: ChatScreenProps) {
  const [rows, setRows] = useState<Row[]>([]);
  const [draft, setDraft] = useState("");
  const [status, setStatus] = useState("Connecting…");
  const [typing, setTyping] = useState(false);
  const [avatarUrl, setAvatarUrl] = useState<string | undefined>(undefined);
  const avatar = useRef<WebView>(null);
  const [client, setClient] = useState<HeraldClient | undefined>(undefined);

  // One client per mount: a closed client cannot connect again, and React may mount an
  // effect twice (StrictMode), so the client is made here rather than memoized.
  useEffect(() => {
    // React Native has a global WebSocket, which the SDK picks up by itself.
    const client = new HeraldClient({ url, token, device: { id: deviceId, name: "React Native", platform: "react-native" } });
    /** Replace the row with `key`, or add it at the end. */
    const upsert = (row: Row) =>
      setRows((old) => {
        const i = old.findIndex((r) => r.key === row.key);
        return i < 0 ? [...old, row] : [...old.slice(0, i), row, ...old.slice(i + 1)];
      });
    const offs = [
      client.on("state", (s) => setStatus(s === "ready" ? "Connected" : s === "waiting" ? "Reconnecting…" : s)),
      client.on("ready", (info) => setAvatarUrl(info.avatarUrl)),
      client.on("message", (reply) => upsert({ key: reply.id, kind: "agent", reply })),
      client.on("typing", setTyping),
      client.on("avatar", (state) => avatar.current?.injectJavaScript(avatarCall("setState", state))),
      client.on("prompt", (card) => upsert({ key: card.id, kind: "card", card })),
      client.on("promptDone", (done) =>
        setRows((old) =>
          old.map((r) => (r.kind === "card" && r.key === done.promptId ? { ...r, answered: done.expired ? "expired" : (done.optionId ?? "") } : r)),
        ),
      ),
      client.on("noAccess", ({ reason }) => setStatus(`No access: ${reason}`)),
      client.on("replaced", () => setStatus("Disconnected: this device id is in use elsewhere")),
      client.on("error", (e) => setStatus(`Error ${e.code}: ${e.message}`)),
    ];
    setClient(client);
    client.connect();
    return () => {
      for (const off of offs) off();
      client.close();
    };
  }, [url, token, deviceId]);

  const send = () => {
    const text = draft.trim();
    if (!text || !client) return;
    try {
      const id = client.send(text);
      setRows((old) => [...old, { key: id, kind: "me", text }]);
      setDraft("");
    } catch (e) {
      // Checked before sending: a message over the frame limit, or a stopped client.
      setStatus(e instanceof HeraldError ? `Not sent (${e.code}): ${e.message}` : String(e));
    }
  };

  return (
    <View style={styles.screen}>
      <Text accessibilityRole="header">{status}</Text>
      <WebView
        ref={avatar}
        style={styles.avatar}
        originWhitelist={["*"]}
        javaScriptEnabled
        source={avatarUrl ? { uri: avatarUrl } : { html: avatarHtml }}
      />
      <FlatList
        style={styles.list}
        data={rows}
        keyExtractor={(row) => row.key}
        renderItem={({ item }) => {
          switch (item.kind) {
            case "me":
              return <Text style={styles.me}>{item.text}</Text>;
            case "agent":
              return <Text style={styles.agent}>{item.reply.text + (item.reply.final ? "" : " …")}</Text>;
            case "card":
              return (
                <View style={styles.card}>
                  <Text>{item.card.text}</Text>
                  {item.card.command ? <Text style={styles.command}>{item.card.command}</Text> : null}
                  {item.card.options
                    .filter((o) => o.id !== CLARIFY_OTHER)
                    .map((o) => (
                      <Button
                        key={o.id}
                        title={o.label}
                        color={o.style === "danger" ? "#d64545" : undefined}
                        disabled={item.answered !== undefined}
                        onPress={() => client?.answer(item.card.id, o.id)}
                      />
                    ))}
                  {item.answered !== undefined ? <Text>{`Answered: ${item.answered}`}</Text> : null}
                </View>
              );
          }
        }}
      />
      {typing ? <Text>The agent is typing…</Text> : null}
      <TextInput accessibilityLabel="Message" value={draft} onChangeText={setDraft} onSubmitEditing={send} placeholder="Message the agent" style={styles.input} />
      <Button title="Send" onPress={send} />
    </View>
  );
}

const styles = StyleSheet.create({
  screen: { flex: 1, padding: 12 },
  avatar: { height: 180 },
  list: { flex: 1 },
  me: { alignSelf: "flex-end", backgroundColor: "#2f6fed", color: "#fff", padding: 8, borderRadius: 10, marginVertical: 4 },
  agent: { alignSelf: "flex-start", backgroundColor: "#eef0f6", padding: 8, borderRadius: 10, marginVertical: 4 },
  card: { borderWidth: 1, borderColor: "#2f6fed", borderRadius: 10, padding: 8, marginVertical: 4 },
  command: { fontFamily: "monospace" },
  input: { borderWidth: 1, borderColor: "#d7dbe6", borderRadius: 8, padding: 8, marginVertical: 8 },
});
