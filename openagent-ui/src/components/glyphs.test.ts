/**
 * The page's text draws with any text font: no emoji or symbol-font glyph (without an emoji
 * font they show as empty boxes); icons are inline SVG (components/Icons.tsx).
 */
import { describe, expect, it } from "vitest";

/** Every source file of the page, as text (Vite's glob import). */
const SOURCES = import.meta.glob<string>(["../**/*.{ts,tsx}", "!../**/*.test.ts", "!../**/*.d.ts"], {
  query: "?raw",
  import: "default",
  eager: true,
});

/** ASCII, Latin-1 (· ×), general punctuation (– — …) and the simple arrows (→ ↔): in every text font. */
const PLAIN = /^[\u0000-\u00ff\u2010-\u2027\u2190-\u2195]$/u;

describe("glyphs", () => {
  it("no source file of the page uses a character outside the plain text fonts", () => {
    const found: string[] = [];
    expect(Object.keys(SOURCES)).toContain("./nodes/AgentNode.tsx");
    for (const [file, text] of Object.entries(SOURCES)) {
      text
        .split("\n")
        .forEach((line, i) => {
          for (const char of line) {
            if (!PLAIN.test(char)) found.push(`${file}:${i + 1}: ${char} (U+${char.codePointAt(0)!.toString(16).toUpperCase()})`);
          }
        });
    }
    expect(found).toEqual([]);
  });

  it("finds an emoji when there is one (the check itself works)", () => {
    expect(PLAIN.test("\u{1F512}")).toBe(false);
    expect(PLAIN.test("\u23F8")).toBe(false);
    expect(PLAIN.test("\u2713")).toBe(false);
    expect(PLAIN.test("·")).toBe(true);
  });
});
