/** How a model id reads to a user: the demo LLM (openagent.testing's demo server) is not a model. */

/** The model id of the demo LLM that scripts/run.sh starts when no LLM is configured. */
export const DEMO_MODEL = "openagent-demo";

/** `openagent-demo (demo LLM, not a model)`; any other id as it is. */
export function modelLabel(model: string): string {
  return model === DEMO_MODEL ? `${model} (demo LLM, not a model)` : model;
}
