// A small stand-in for the `vscode` module (vitest aliases `vscode` to this file). It fakes the
// API at the boundary only: values, events and recorded calls, no editor behaviour. Tests steer
// it through `fake` (reset, settings, canned answers to prompts) and read back what was shown.

type Listener<T> = (value: T) => unknown;

export class Disposable {
  constructor(private readonly onDispose: () => void = () => {}) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((item) => item.dispose()));
  }
  dispose(): void { this.onDispose(); }
}

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.push(listener);
    return new Disposable(() => { this.listeners = this.listeners.filter((l) => l !== listener); });
  };
  fire(value: T): void { [...this.listeners].forEach((listener) => listener(value)); }
  dispose(): void { this.listeners = []; }
}

export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  readonly token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel(): void { this.token.isCancellationRequested = true; this.emitter.fire(); }
  dispose(): void { this.emitter.dispose(); }
}

export class Uri {
  private constructor(readonly scheme: string, readonly path: string) {}
  static file(path: string): Uri { return new Uri("file", path); }
  static parse(value: string): Uri {
    const match = /^([a-z][a-z0-9+.-]*):(?:\/\/[^/]*)?(.*)$/i.exec(value);
    if (!match) throw new Error(`not a URI: ${value}`);
    return new Uri(match[1], decodeURIComponent(match[2]));
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, [base.path.replace(/\/$/, ""), ...parts].join("/"));
  }
  get fsPath(): string { return this.path; }
  toString(): string { return `${this.scheme}://${encodeURI(this.path)}`; }
}

export class Position {
  constructor(readonly line: number, readonly character: number) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(start: Position | number, end: Position | number, endLine?: number, endCharacter?: number) {
    this.start = typeof start === "number" ? new Position(start, end as number) : start;
    this.end = typeof start === "number" ? new Position(endLine!, endCharacter!) : (end as Position);
  }
  get isEmpty(): boolean {
    return this.start.line === this.end.line && this.start.character === this.end.character;
  }
}

export class Selection extends Range {
  constructor(readonly anchor: Position, readonly active: Position) {
    const forward = anchor.line < active.line || (anchor.line === active.line && anchor.character <= active.character);
    super(forward ? anchor : active, forward ? active : anchor);
  }
}

export class Location {
  constructor(readonly uri: Uri, readonly range: Range | Position) {}
}

export class ThemeColor { constructor(readonly id: string) {} }
export class ThemeIcon { constructor(readonly id: string) {} }
export class MarkdownString {
  constructor(public value = "", public supportThemeIcons = false) {}
  appendMarkdown(text: string): this { this.value += text; return this; }
  appendText(text: string): this { this.value += text; return this; }
}

// Classes vscode-languageclient extends when it loads (test/unit/requireVscode.ts lets it).
class Placeholder { constructor(..._args: unknown[]) {} }
export class CallHierarchyItem extends Placeholder {}
export class CodeAction extends Placeholder {}
export class CodeLens extends Placeholder {}
export class CompletionItem extends Placeholder {}
export class Diagnostic extends Placeholder {}
export class DocumentLink extends Placeholder {}
export class InlayHint extends Placeholder {}
export class SymbolInformation extends Placeholder {}
export class TypeHierarchyItem extends Placeholder {}
export class CancellationError extends Error {}

export enum StatusBarAlignment { Left = 1, Right = 2 }
export enum TreeItemCollapsibleState { None = 0, Collapsed = 1, Expanded = 2 }
export enum TextEditorRevealType { Default = 0, InCenter = 1, InCenterIfOutsideViewport = 2, AtTop = 3 }

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: unknown;
  iconPath?: unknown;
  resourceUri?: Uri;
  command?: { command: string; title: string; arguments?: unknown[] };
  contextValue?: string;
  accessibilityInformation?: { label: string };
  constructor(public label: string, public collapsibleState: TreeItemCollapsibleState = TreeItemCollapsibleState.None) {}
}
export enum ViewColumn { Active = -1, Beside = -2, One = 1 }
export enum ConfigurationTarget { Global = 1, Workspace = 2, WorkspaceFolder = 3 }
export enum ProgressLocation { SourceControl = 1, Window = 10, Notification = 15 }
export enum LanguageModelChatMessageRole { User = 1, Assistant = 2 }

export class LanguageModelTextPart { constructor(readonly value: string) {} }
export class LanguageModelToolResult { constructor(readonly content: unknown[]) {} }

export class LanguageModelChatMessage {
  static User(content: string): LanguageModelChatMessage {
    return new LanguageModelChatMessage(LanguageModelChatMessageRole.User, content);
  }
  static Assistant(content: string): LanguageModelChatMessage {
    return new LanguageModelChatMessage(LanguageModelChatMessageRole.Assistant, content);
  }
  readonly content: LanguageModelTextPart[];
  constructor(readonly role: LanguageModelChatMessageRole, content: string) {
    this.content = [new LanguageModelTextPart(content)];
  }
}

export class ChatResponseMarkdownPart {
  readonly value: MarkdownString;
  constructor(value: string | MarkdownString) {
    this.value = typeof value === "string" ? new MarkdownString(value) : value;
  }
}
export class ChatRequestTurn { constructor(readonly prompt: string, readonly command?: string) {} }
export class ChatResponseTurn { constructor(readonly response: ChatResponseMarkdownPart[]) {} }

// ---- recorded state, reset by fake.reset() -----------------------------------------------------

export interface ShownMessage { level: "info" | "warning" | "error"; text: string; actions: string[] }
export interface FakeStatusBarItem {
  text: string; tooltip: unknown; command: unknown; backgroundColor: ThemeColor | undefined;
  name: string | undefined; visible: boolean; show(): void; hide(): void; dispose(): void;
}
export interface FakeTextDocument {
  uri: Uri; languageId: string; getText(range?: Range): string;
  lineCount?: number; lineAt?(line: number): { range: Range };
}
export interface FakeTextEditor { document: FakeTextDocument; selection: Selection; revealed?: Range; revealRange?(range: Range): void }
export interface FakeTreeView {
  id: string; provider: unknown; message: string | undefined; description: string | undefined;
  selection: unknown[]; revealed: { element: unknown; options: unknown }[]; disposed: boolean;
  reveal(element: unknown, options?: unknown): Promise<void>; dispose(): void;
}
export interface FakeInputBox {
  title: string; placeholder: string; prompt: string; value: string; valueSelection: [number, number] | undefined;
  busy: boolean; visible: boolean; disposed: boolean;
  onDidChangeValue: EventEmitter<string>["event"]; onDidAccept: EventEmitter<void>["event"]; onDidHide: EventEmitter<void>["event"];
  /** What the user does: type (fires onDidChangeValue), press Enter, press Escape. */
  type(value: string): void; accept(): void; escape(): void;
  show(): void; hide(): void; dispose(): void;
}

function freshState() {
  return {
    /** Settings by full key, e.g. "ragLsp.topK"; values set here are user (global) values. */
    settings: {} as Record<string, unknown>,
    /** Workspace-level values, e.g. from .vscode/settings.json. */
    workspaceSettings: {} as Record<string, unknown>,
    /** Defaults, as package.json would contribute them. */
    defaults: {} as Record<string, unknown>,
    messages: [] as ShownMessage[],
    /** Answers for the next prompts, in order (a string picks that action / item label). */
    answers: [] as unknown[],
    commands: new Map<string, (...args: unknown[]) => unknown>(),
    executed: [] as { command: string; args: unknown[] }[],
    statusBarItems: [] as FakeStatusBarItem[],
    output: [] as string[],
    /** Lines logged at warning or error level (also in `output`). */
    outputErrors: [] as string[],
    openedDocuments: [] as { language?: string; content?: string }[],
    clipboard: "",
    chatModels: [] as unknown[],
    chatParticipants: new Map<string, unknown>(),
    /** Language model tools by name, as registered with lm.registerTool. */
    lmTools: new Map<string, unknown>(),
    treeViews: new Map<string, FakeTreeView>(),
    inputBoxes: [] as FakeInputBox[],
    contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): string; onDidChange?: unknown }>(),
    /** Text of the files showTextDocument/openTextDocument(uri) can open, by URI string. */
    files: new Map<string, string>(),
    /** Editors shown, in order. */
    shownEditors: [] as FakeTextEditor[],
    configurationListeners: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  };
}

export const fake = {
  state: freshState(),
  reset(): void {
    fake.state = freshState();
    window.activeTextEditor = undefined;
    workspace.workspaceFolders = undefined;
    workspace.isTrusted = true;
    env.remoteName = undefined;
  },
  /** The answer for the next prompt, or undefined (the user pressed Escape). */
  nextAnswer(): unknown { return fake.state.answers.shift(); },
  /** Change settings and tell listeners, as VS Code does when the user edits them. */
  changeSettings(values: Record<string, unknown>): void {
    Object.assign(fake.state.settings, values);
    const keys = Object.keys(values);
    fake.state.configurationListeners.fire({
      affectsConfiguration: (section) => keys.some((key) => key === section || key.startsWith(section + ".")),
    });
  },
  editor(uri: Uri, text: string, selection = new Selection(new Position(0, 0), new Position(0, 0)), languageId = "python"): FakeTextEditor {
    const lines = text.split("\n");
    const getText = (range?: Range): string => {
      if (!range) return text;
      const picked = lines.slice(range.start.line, range.end.line + 1);
      if (picked.length === 0) return "";
      picked[picked.length - 1] = picked[picked.length - 1].slice(0, range.end.character);
      picked[0] = picked[0].slice(range.start.character);
      return picked.join("\n");
    };
    return { document: { uri, languageId, getText }, selection };
  },
};

function show(level: ShownMessage["level"]) {
  return async (text: string, ...rest: unknown[]): Promise<string | undefined> => {
    const actions = rest.filter((item): item is string => typeof item === "string");
    fake.state.messages.push({ level, text, actions });
    const answer = fake.nextAnswer();
    return typeof answer === "string" && actions.includes(answer) ? answer : undefined;
  };
}

export const window = {
  activeTextEditor: undefined as FakeTextEditor | undefined,
  showInformationMessage: show("info"),
  showWarningMessage: show("warning"),
  showErrorMessage: show("error"),
  async showQuickPick<T extends string | { label: string }>(items: readonly T[] | Thenable<readonly T[]>): Promise<T | undefined> {
    const answer = fake.nextAnswer();
    return (await items).find((item) => (typeof item === "string" ? item : item.label) === answer);
  },
  async showInputBox(): Promise<string | undefined> {
    const answer = fake.nextAnswer();
    return typeof answer === "string" ? answer : undefined;
  },
  createStatusBarItem(): FakeStatusBarItem {
    const item: FakeStatusBarItem = {
      text: "", tooltip: undefined, command: undefined, backgroundColor: undefined, name: undefined, visible: false,
      show() { item.visible = true; }, hide() { item.visible = false; }, dispose() { item.visible = false; },
    };
    fake.state.statusBarItems.push(item);
    return item;
  },
  createOutputChannel(name: string) {
    const line = (text: string) => fake.state.output.push(text);
    const error = (text: string) => { fake.state.outputErrors.push(text); line(text); };
    // vscode-languageclient writes its own log lines as "[Error - 10:00:00 AM] …".
    const appendLine = (text: string) => (/^\[(Error|Warn)/.test(text) ? error(text) : line(text));
    return {
      name, append: line, appendLine, info: line, warn: error, error, debug: line, trace: line,
      clear() {}, show() { fake.state.executed.push({ command: "output.show", args: [name] }); }, hide() {}, dispose() {},
    };
  },
  createTreeView(id: string, options: { treeDataProvider: unknown }): FakeTreeView {
    const view: FakeTreeView = {
      id, provider: options.treeDataProvider, message: undefined, description: undefined, selection: [], revealed: [], disposed: false,
      async reveal(element, revealOptions) { view.revealed.push({ element, options: revealOptions }); },
      dispose() { view.disposed = true; fake.state.treeViews.delete(id); },
    };
    fake.state.treeViews.set(id, view);
    return view;
  },
  createInputBox(): FakeInputBox {
    const changed = new EventEmitter<string>();
    const accepted = new EventEmitter<void>();
    const hidden = new EventEmitter<void>();
    const input: FakeInputBox = {
      title: "", placeholder: "", prompt: "", value: "", valueSelection: undefined, busy: false, visible: false, disposed: false,
      onDidChangeValue: changed.event, onDidAccept: accepted.event, onDidHide: hidden.event,
      type(value) { input.value = value; changed.fire(value); },
      accept() { accepted.fire(); },
      escape() { input.hide(); },
      show() { input.visible = true; },
      hide() { if (input.visible) { input.visible = false; hidden.fire(); } },
      dispose() { input.disposed = true; },
    };
    fake.state.inputBoxes.push(input);
    return input;
  },
  async showTextDocument(document: FakeTextDocument): Promise<FakeTextEditor> {
    const editor: FakeTextEditor = {
      document, selection: new Selection(new Position(0, 0), new Position(0, 0)),
      revealRange(range: Range) { editor.revealed = range; },
    };
    fake.state.shownEditors.push(editor);
    return editor;
  },
  async withProgress<R>(_options: unknown, task: (progress: { report(value: unknown): void }, token: CancellationTokenSource["token"]) => Thenable<R>): Promise<R> {
    return task({ report() {} }, new CancellationTokenSource().token);
  },
};

function lookup(key: string): { global?: unknown; workspace?: unknown; fallback?: unknown } {
  return {
    global: fake.state.settings[key],
    workspace: fake.state.workspaceSettings[key],
    fallback: fake.state.defaults[key],
  };
}

export const workspace = {
  workspaceFolders: undefined as { uri: Uri; name: string; index: number }[] | undefined,
  isTrusted: true,
  getConfiguration(section?: string) {
    const full = (key: string) => (section ? `${section}.${key}` : key);
    return {
      get<T>(key: string, defaultValue?: T): T | undefined {
        const { global, workspace: inWorkspace, fallback } = lookup(full(key));
        return (inWorkspace ?? global ?? fallback ?? defaultValue) as T | undefined;
      },
      has(key: string): boolean { return Object.values(lookup(full(key))).some((v) => v !== undefined); },
      inspect<T>(key: string) {
        const { global, workspace: inWorkspace, fallback } = lookup(full(key));
        return { key: full(key), defaultValue: fallback as T, globalValue: global as T, workspaceValue: inWorkspace as T };
      },
      async update(key: string, value: unknown): Promise<void> { fake.changeSettings({ [full(key)]: value }); },
    };
  },
  onDidChangeConfiguration(listener: Listener<{ affectsConfiguration(section: string): boolean }>): Disposable {
    return fake.state.configurationListeners.event(listener);
  },
  async openTextDocument(options: Uri | { language?: string; content?: string }): Promise<FakeTextDocument> {
    if (options instanceof Uri) return documentAt(options);
    fake.state.openedDocuments.push(options);
    return { uri: Uri.parse("untitled:Untitled-1"), languageId: options.language ?? "plaintext", getText: () => options.content ?? "" };
  },
  getWorkspaceFolder(uri: Uri) {
    const inside = (folder: Uri) => uri.path === folder.path || uri.path.startsWith(`${folder.path.replace(/\/$/, "")}/`);
    return workspace.workspaceFolders?.find((folder) => folder.uri.scheme === uri.scheme && inside(folder.uri));
  },
  registerTextDocumentContentProvider(scheme: string, provider: { provideTextDocumentContent(uri: Uri): string }): Disposable {
    fake.state.contentProviders.set(scheme, provider);
    return new Disposable(() => fake.state.contentProviders.delete(scheme));
  },
};

/** A document for `uri`: a file from fake.state.files, or a content provider's text. */
function documentAt(uri: Uri): FakeTextDocument {
  const provider = fake.state.contentProviders.get(uri.scheme);
  const text = provider ? provider.provideTextDocumentContent(uri) : fake.state.files.get(uri.toString());
  if (text === undefined) throw new Error(`cannot open ${uri.toString()}: no such file`);
  const lines = text.split("\n");
  return {
    uri, languageId: uri.path.endsWith(".md") ? "markdown" : "plaintext", getText: () => text, lineCount: lines.length,
    lineAt: (line: number) => ({ range: new Range(line, 0, line, lines[line].length) }),
  };
}

export const commands = {
  registerCommand(command: string, callback: (...args: unknown[]) => unknown): Disposable {
    fake.state.commands.set(command, callback);
    return new Disposable(() => fake.state.commands.delete(command));
  },
  async executeCommand(command: string, ...args: unknown[]): Promise<unknown> {
    fake.state.executed.push({ command, args });
    return fake.state.commands.get(command)?.(...args);
  },
};

export const env = {
  remoteName: undefined as string | undefined,
  clipboard: {
    async writeText(text: string): Promise<void> { fake.state.clipboard = text; },
    async readText(): Promise<string> { return fake.state.clipboard; },
  },
};

export const lm = {
  async selectChatModels(): Promise<unknown[]> { return fake.state.chatModels; },
  registerTool(name: string, tool: unknown): Disposable {
    if (fake.state.lmTools.has(name)) throw new Error(`Tool "${name}" is already registered.`);
    fake.state.lmTools.set(name, tool);
    return new Disposable(() => fake.state.lmTools.delete(name));
  },
};

export const chat = {
  createChatParticipant(id: string, handler: unknown) {
    const participant = { id, requestHandler: handler, iconPath: undefined as unknown, dispose() { fake.state.chatParticipants.delete(id); } };
    fake.state.chatParticipants.set(id, participant);
    return participant;
  },
};
