/** The store in React: one instance per page, read with `useAppStore(selector)`. */
import { createContext, useContext, useState, type ReactNode } from "react";
import { useStore } from "zustand";
import { createAppStore, type AppState, type AppStore, type StoreOptions } from "./store";

const StoreContext = createContext<AppStore | null>(null);

export function AppStoreProvider({ children, options }: { children: ReactNode; options?: StoreOptions }) {
  const [store] = useState(() => createAppStore(options));
  return <StoreContext.Provider value={store}>{children}</StoreContext.Provider>;
}

export function useAppStoreApi(): AppStore {
  const store = useContext(StoreContext);
  if (store === null) throw new Error("useAppStore must be used inside <AppStoreProvider>");
  return store;
}

/** Read the store; combine with `useShallow` for object or array selections. */
export function useAppStore<T>(selector: (state: AppState) => T): T {
  return useStore(useAppStoreApi(), selector);
}
