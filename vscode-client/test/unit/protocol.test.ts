import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_QUERY_CHARS, Notifications, Requests } from "../../src/protocol";
import { SERVER_SETTINGS } from "../../src/settings";

const SCHEMAS = join(__dirname, "../../../schemas");

function protocolSchemas(): { file: string; method: string; kind: string }[] {
  const dir = join(SCHEMAS, "protocol");
  return readdirSync(dir).filter((file) => file.endsWith(".json")).map((file) => {
    const schema = JSON.parse(readFileSync(join(dir, file), "utf8"));
    return { file, method: schema["x-method"], kind: schema["x-kind"] };
  });
}

describe("method names shared with the server", () => {
  it("has one schema per request constant, and no others", () => {
    const requests = protocolSchemas().filter((s) => s.kind === "request").map((s) => s.method);
    expect([...Object.values(Requests)].sort()).toEqual(requests.sort());
  });

  it("has one schema per notification constant, and no others", () => {
    const notifications = protocolSchemas().filter((s) => s.kind === "notification").map((s) => s.method);
    expect([...Object.values(Notifications)].sort()).toEqual(notifications.sort());
  });

  it("caps queries at the schemas' maxLength", () => {
    for (const file of ["rag.search.json", "rag.injectContext.json", "rag.kb.search.json"]) {
      const schema = JSON.parse(readFileSync(join(SCHEMAS, "protocol", file), "utf8"));
      expect(schema.$defs.params.properties.query.maxLength).toBe(MAX_QUERY_CHARS);
    }
  });

  it("names each schema file after its method", () => {
    for (const { file, method } of protocolSchemas()) expect(file).toBe(`${method.replace("/", ".")}.json`);
  });
});

describe("settings shared with the server", () => {
  it("lists exactly the schema's properties as server settings", () => {
    const schema = JSON.parse(readFileSync(join(SCHEMAS, "config.schema.json"), "utf8"));
    expect([...SERVER_SETTINGS].sort()).toEqual(Object.keys(schema.properties).sort());
  });
});
