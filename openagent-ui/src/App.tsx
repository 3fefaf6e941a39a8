import { ReactFlowProvider } from "@xyflow/react";
import { useEffect } from "react";
import { ApprovalsPanel } from "./components/ApprovalsPanel";
import { Builder } from "./components/Builder";
import { Canvas } from "./components/Canvas";
import { Chat } from "./components/Chat";
import { Details } from "./components/Details";
import { Header } from "./components/Header";
import { Notices } from "./components/Notices";
import { Keys } from "./components/Keys";
import { Restore } from "./components/Restore";
import { SandboxLogs } from "./components/SandboxLogs";
import { Sidebar } from "./components/Sidebar";
import { useAppStore, useAppStoreApi } from "./store/context";

function isTyping(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  return !!el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
}

/** Undo/redo keys for the canvas, and reconnecting with the key kept in session storage. */
function useShortcuts() {
  const store = useAppStoreApi();
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (!(event.ctrlKey || event.metaKey) || isTyping(event.target)) return;
      const key = event.key.toLowerCase();
      if (key === "z" && !event.shiftKey) store.getState().undo();
      else if ((key === "z" && event.shiftKey) || key === "y") store.getState().redo();
      else return;
      event.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [store]);
  useEffect(() => {
    const { baseUrl, apiKey, connection, connect } = store.getState();
    if (connection === "disconnected" && (baseUrl || apiKey)) void connect(baseUrl, apiKey);
  }, [store]);
}

export function App() {
  useShortcuts();
  const readOnly = useAppStore((s) => !s.canQuery());
  return (
    <ReactFlowProvider>
      <div className={readOnly ? "app read-only" : "app"}>
        <Header />
        <main className="workspace">
          <Notices />
          <Sidebar />
          <Canvas />
          <Details />
        </main>
        <Chat />
        <ApprovalsPanel />
        <Builder />
        <Restore />
        <Keys />
        <SandboxLogs />
      </div>
    </ReactFlowProvider>
  );
}
