// The few React Native components and APIs the example uses, typed just enough to
// check it without installing React Native. A real app uses the real types.
import type { ComponentType, ReactNode } from "react";

export type Style = Record<string, string | number | undefined>;
type StyleProp = Style | readonly (Style | false | undefined)[] | undefined;

export const View: ComponentType<{ style?: StyleProp; children?: ReactNode; accessibilityLabel?: string }>;
export const Text: ComponentType<{ style?: StyleProp; children?: ReactNode; accessibilityRole?: "text" | "header" | "alert" }>;
export const TextInput: ComponentType<{
  style?: StyleProp;
  value: string;
  onChangeText: (text: string) => void;
  onSubmitEditing?: () => void;
  placeholder?: string;
  accessibilityLabel?: string;
}>;
export const Button: ComponentType<{ title: string; onPress: () => void; disabled?: boolean | undefined; color?: string | undefined }>;
export const FlatList: <T>(props: {
  data: readonly T[];
  keyExtractor: (item: T) => string;
  renderItem: (info: { item: T }) => ReactNode;
  style?: StyleProp;
}) => ReactNode;
export const StyleSheet: { create<T extends Record<string, Style>>(styles: T): T };
