/**
 * The builder slice: the agent builder panel. Describe an agent, generate it with the
 * master's LLM (`POST /generate-agent`), read the code and its checks, name the module and
 * save it (`POST /save-agent`, asking before overwriting), after which discovery lists it.
 */
import { ApiError } from "../api/client";
import {
  EMPTY_FORM,
  formProblem,
  generateBody,
  generatedFrom,
  generationFailure,
  moduleNameProblem,
  type BuilderForm,
  type Generated,
  type GeneratorModels,
  type Saved,
} from "../lib/builder";
import { failureOf, type SliceCreator } from "./runtime";

/** The agent builder panel: describe, generate, read the code and checks, name, save. */
export interface BuilderState {
  open: boolean;
  form: BuilderForm;
  /** `GET /generate-agent/models`; `null` until loaded. */
  models: GeneratorModels | null;
  /** Why generating is impossible on this master (403 with the generator off, no LLM). */
  unavailable: string | null;
  phase: "idle" | "loading" | "generating" | "saving";
  /** The code and its checks (a 422 with failed checks keeps its code here too). */
  generated: Generated | null;
  /** The module name to save as (editable). */
  module: string;
  /** The last failure, with the master's message. */
  error: { status: number; message: string } | null;
  /** The master refused to replace an existing file: its message, until the user decides. */
  confirmOverwrite: string | null;
  /** The last save, and the agent id discovery lists for it (`null` when it is not listed). */
  saved: (Saved & { agentId: string | null }) | null;
}

export interface BuilderSlice {
  builder: BuilderState;

  openBuilder(): Promise<void>;
  closeBuilder(): void;
  setBuilderForm(change: Partial<BuilderForm>): void;
  setBuilderModule(module: string): void;
  generateAgent(): Promise<void>;
  /** Save the generated code; `overwrite` after the user confirmed replacing the file. */
  saveAgent(overwrite?: boolean): Promise<void>;
  cancelOverwrite(): void;
}

const INITIAL_BUILDER: BuilderState = {
  open: false,
  form: EMPTY_FORM,
  models: null,
  unavailable: null,
  phase: "idle",
  generated: null,
  module: "",
  error: null,
  confirmOverwrite: null,
  saved: null,
};

const NOT_CONNECTED = { status: 0, message: "Not connected: connect to a master first" };

export const createBuilderSlice: SliceCreator<BuilderSlice> = (set, get) => {
  function setBuilder(change: Partial<BuilderState>) {
    set({ builder: { ...get().builder, ...change } });
  }

  return {
    builder: INITIAL_BUILDER,

    async openBuilder() {
      setBuilder({ open: true });
      const api = get().api;
      if (!api) {
        setBuilder({ unavailable: "Connect to a master to generate agents" });
        return;
      }
      if (get().builder.phase !== "idle") return;
      setBuilder({ phase: "loading" });
      try {
        const models = await api.generatorModels();
        const form = get().builder.form;
        const model = form.model && models.allowed_models.includes(form.model) ? form.model : models.default_model;
        setBuilder({
          models,
          form: { ...form, model },
          unavailable: models.available ? null : "The master has no LLM configured: generating answers 503",
        });
      } catch (error) {
        const failure = failureOf(error);
        // 403: the key is not an administrator's. The panel says so instead of offering a form that cannot work.
        setBuilder(failure.status === 403 ? { unavailable: failure.message } : { error: failure });
      } finally {
        setBuilder({ phase: "idle" });
      }
    },
    closeBuilder() {
      setBuilder({ open: false });
    },
    setBuilderForm(change) {
      setBuilder({ form: { ...get().builder.form, ...change } });
    },
    setBuilderModule(module) {
      setBuilder({ module, confirmOverwrite: null });
    },

    async generateAgent() {
      const { api, builder } = get();
      if (builder.phase !== "idle") return;
      const problem = formProblem(builder.form);
      if (problem) {
        setBuilder({ error: { status: 0, message: problem } });
        return;
      }
      if (!api) {
        setBuilder({ error: NOT_CONNECTED });
        return;
      }
      setBuilder({ phase: "generating", error: null, generated: null, saved: null, confirmOverwrite: null });
      try {
        const generated = generatedFrom(await api.generateAgent(generateBody(builder.form)));
        setBuilder({ generated, module: generated.module });
      } catch (error) {
        const failure = failureOf(error);
        const failed = error instanceof ApiError && error.status === 422 ? generationFailure(error.body) : null;
        if (failed?.generated) setBuilder({ generated: failed.generated, module: failed.generated.module });
        if (failure.status === 403) setBuilder({ unavailable: failure.message });
        setBuilder({ error: failure });
      } finally {
        setBuilder({ phase: "idle" });
      }
    },

    async saveAgent(overwrite = false) {
      const { api, builder } = get();
      if (builder.phase !== "idle" || !builder.generated) return;
      const problem = moduleNameProblem(builder.module);
      if (problem) {
        setBuilder({ error: { status: 0, message: `Module name: ${problem}` } });
        return;
      }
      if (!api) {
        setBuilder({ error: NOT_CONNECTED });
        return;
      }
      setBuilder({ phase: "saving", error: null, confirmOverwrite: null, saved: null });
      try {
        const saved = await api.saveAgent({ module: builder.module, source: builder.generated.source, overwrite });
        // The saved module is listed by discovery at once, ready to drag from the sidebar.
        const found = await api.discover().catch(() => null);
        if (found) get().setDiscovery(found);
        const row = found?.agents.find((a) => a.handler === saved.handler || a.module === saved.handler);
        setBuilder({ saved: { module: saved.module, file: saved.file, handler: saved.handler, agentId: row?.agent_id ?? null } });
        const problemRow = found?.errors.find((e) => e.file === saved.file);
        if (row) get().notify("info", `Saved ${saved.file}: ${row.agent_id} is listed in the sidebar, ready to drag`);
        else if (problemRow) get().notify("warning", `Saved ${saved.file}, but discovery cannot list it: ${problemRow.error}`);
      } catch (error) {
        if (error instanceof ApiError && error.status === 400 && error.code === "file_exists") {
          setBuilder({ confirmOverwrite: error.message });
        } else {
          setBuilder({ error: failureOf(error) });
        }
      } finally {
        setBuilder({ phase: "idle" });
      }
    },
    cancelOverwrite() {
      setBuilder({ confirmOverwrite: null });
    },
  };
};
