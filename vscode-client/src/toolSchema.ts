// The agent tools' input schemas (../schemas/agent-tools.json, the file `rag-lsp mcp` serves
// from too) and a check of a tool's input against one, worded as the Python side words it
// (rag_lsp/schema_messages.py): "$.top_k = 0: must be at least 1". No vscode import.
//
// The check covers the keywords those schemas use (type, properties, required,
// additionalProperties, items, enum, minLength/maxLength, minimum/maximum, maxItems); a test
// fails when a schema there uses any other, so a new rule cannot go unchecked here.
import catalogue from "../../schemas/agent-tools.json";

export interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean;
  items?: JsonSchema;
  enum?: unknown[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  default?: unknown;
  description?: string;
}

/** The keywords schemaProblems() checks, and the ones that only describe. */
export const CHECKED_KEYWORDS = ["type", "properties", "required", "additionalProperties", "items", "enum",
  "minLength", "maxLength", "minimum", "maximum", "maxItems"] as const;
export const DESCRIPTIVE_KEYWORDS = ["default", "description"] as const;

export interface AgentTool { name: string; title: string; description: string; inputSchema: JsonSchema }

/** An agent tool of schemas/agent-tools.json by its name there ("search_code"). */
export function agentTool(name: string): AgentTool {
  const tool = (catalogue.tools as unknown as AgentTool[]).find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name} in schemas/agent-tools.json`);
  return tool;
}

/** A value as the user wrote it, kept short (Python's repr for strings, JSON otherwise). */
export function showValue(value: unknown): string {
  const text = typeof value === "string" ? pyRepr(value) : JSON.stringify(value) ?? String(value);
  return text.length <= 60 ? text : text.slice(0, 57) + "...";
}

/** A string quoted the way Python's repr() quotes it, as the Python side's answers do. */
export function pyRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escaped = text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");
  return quote + (quote === "'" ? escaped.replace(/'/g, "\\'") : escaped) + quote;
}

const TYPE_WORDS: Record<string, string> = {
  integer: "an integer", number: "a number", string: "a string", boolean: "true or false",
  array: "a list", object: "an object", null: "null",
};

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case "integer": return typeof value === "number" && Number.isInteger(value);
    case "number": return typeof value === "number" && Number.isFinite(value);
    case "string": return typeof value === "string";
    case "boolean": return typeof value === "boolean";
    case "array": return Array.isArray(value);
    case "object": return typeof value === "object" && value !== null && !Array.isArray(value);
    case "null": return value === null;
    default: return true;
  }
}

const count = (n: number) => n.toLocaleString("en-US");

/** Every way `value` breaks `schema`, one line each; empty when it fits. */
export function schemaProblems(schema: JsonSchema, value: unknown, path = "$"): string[] {
  const broken = (rule: string) => [`${path} = ${showValue(value)}: ${rule}`];
  if (schema.type && !hasType(value, schema.type)) return broken(`must be ${TYPE_WORDS[schema.type] ?? schema.type}`);
  if (schema.enum && !schema.enum.some((allowed) => allowed === value)) {
    return broken("must be one of " + schema.enum.map(showValue).join(", "));
  }
  if (typeof value === "string") {
    const length = [...value].length; // code points, as JSON Schema counts
    if (schema.minLength !== undefined && length < schema.minLength) {
      return broken(schema.minLength === 1 ? "must not be empty" : `must be at least ${count(schema.minLength)} characters`);
    }
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      return broken(`must be at most ${count(schema.maxLength)} characters (got ${count(length)})`);
    }
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) return broken(`must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) return broken(`must be at most ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      return broken(`must have at most ${count(schema.maxItems)} items (got ${count(value.length)})`);
    }
    const items = schema.items;
    return items ? value.flatMap((item, i) => schemaProblems(items, item, `${path}[${i}]`)) : [];
  }
  if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>;
    const properties = schema.properties ?? {};
    const found: string[] = [];
    for (const key of schema.required ?? []) if (!(key in record)) found.push(`${path}.${key}: required`);
    for (const [key, item] of Object.entries(record)) {
      if (key in properties) found.push(...schemaProblems(properties[key], item, `${path}.${key}`));
      else if (schema.additionalProperties === false) {
        found.push(`${path}.${key}: unknown field (known: ${Object.keys(properties).sort().join(", ")})`);
      }
    }
    return found;
  }
  return [];
}

/** `input` with the schema's defaults filled in where it leaves a property out. */
export function withDefaults<T extends object>(schema: JsonSchema, input: T): T {
  const defaults: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(schema.properties ?? {})) {
    if (property.default !== undefined) defaults[key] = property.default;
  }
  return { ...defaults, ...input } as T;
}
