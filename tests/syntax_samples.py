"""One small source file per tree-sitter language, with the definitions a reader sees in it.

Each sample has a type with two members, big enough (at the tests' small chunk size) that the
type is split into its own lines plus one chunk per member, and a free function.
"""

SAMPLES: dict[str, tuple[str, str, list[tuple[str, str, int, int]]]] = {
    # language: (file name, source, the exact chunks at the tests' small size:
    #            (kind, symbol, first line, last line))
    "javascript": ("app.js", """\
const express = require('express');

/**
 * The application prototype: routing and settings for every request.
 */
class Application extends Base {
  handle(request, response, next) {
    const router = this.router; return router.handle(request, response, next);
  }
  listen(port, callback) {
    const server = http.createServer(this); return server.listen(port, callback);
  }
}

app.render = function render(name, options, callback) {
  return view.render(name, options, callback);
};
""", [
     ('module', 'app', 1, 1),
     ('class', 'Application', 3, 6),
     ('method', 'Application.handle', 7, 9),
     ('method', 'Application.listen', 10, 13),
     ('function', 'app.render', 15, 17)]),
    "typescript": ("core.ts", """\
import { resolve } from 'node:path'

export interface RunnerOptions { watch: boolean; root: string }

export class Vitest<T> {
  async start(filters: string[]): Promise<void> {
    await this.collect(filters); await this.runFiles(this.state.getFiles())
  }
  public close(force = false): Promise<void> {
    return this.server.close().then(() => this.pool.close(force))
  }
}

export const createVitest = async (options: RunnerOptions) => new Vitest(options)
""", [
     ('module', 'core', 1, 1),
     ('class', 'RunnerOptions', 3, 3),
     ('class', 'Vitest', 5, 5),
     ('method', 'Vitest.start', 6, 6),
     ('method', 'Vitest.start', 7, 8),
     ('method', 'Vitest.close', 9, 12),
     ('function', 'createVitest', 14, 14)]),
    "tsx": ("Button.tsx", """\
export function Button({ label, onClick }: Props) {
  return <button className="primary" onClick={onClick}>{label}</button>
}
""", [
     ('function', 'Button', 1, 3)]),
    "go": ("gin.go", """\
package gin

// Engine is the framework's instance: the muxer, middleware and settings.
type Engine struct {
	RouterGroup
	trees methodTrees
}

// Use attaches a global middleware to the router.
func (engine *Engine) Use(middleware ...HandlerFunc) IRoutes {
	engine.RouterGroup.Use(middleware...)
	return engine
}

func New(opts ...OptionFunc) *Engine {
	return &Engine{}
}
""", [
     ('module', 'gin', 1, 1),
     ('class', 'Engine', 3, 7),
     ('method', 'Engine.Use', 9, 9),
     ('method', 'Engine.Use', 10, 10),
     ('method', 'Engine.Use', 11, 13),
     ('function', 'New', 15, 17)]),
    "rust": ("router.rs", """\
use std::sync::Arc;

/// The router: paths to services.
#[derive(Clone)]
pub struct Router<S> { inner: Arc<RouterInner<S>> }

impl<S> Service<Request> for Router<S> {
    fn call(&mut self, request: Request) -> Self::Future {
        let path = request.uri().path().to_owned(); self.inner.route(path, request)
    }
    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
}

pub fn route(path: &str) -> Router<()> { Router::new().route(path) }
""", [
     ('module', 'router', 1, 1),
     ('class', 'Router', 3, 5),
     ('class', 'impl Service<Request> for Router', 7, 7),
     ('method', 'Router.call', 8, 8),
     ('method', 'Router.call', 9, 10),
     ('method', 'Router.poll_ready', 11, 11),
     ('method', 'Router.poll_ready', 12, 14),
     ('function', 'route', 16, 16)]),
    "java": ("Server.java", """\
package org.example;

public class Server extends AbstractServer {
    public void start(int port) throws IOException {
        this.socket = new ServerSocket(port); this.running = true; this.accept();
    }
    public void stop() {
        this.running = false; this.socket.close(); this.executor.shutdownNow();
    }
}
""", [
     ('module', 'Server', 1, 1),
     ('class', 'Server', 3, 3),
     ('method', 'Server.start', 4, 6),
     ('method', 'Server.stop', 7, 10)]),
    "c": ("buffer.c", """\
#include <stdlib.h>

struct buffer { char *data; size_t length; size_t capacity; };

int buffer_append(struct buffer *buffer, const char *bytes, size_t count) {
    if (buffer->length + count > buffer->capacity) return -1;
    memcpy(buffer->data + buffer->length, bytes, count);
    return 0;
}
""", [
     ('module', 'buffer', 1, 1),
     ('class', 'buffer', 3, 3),
     ('function', 'buffer_append', 5, 5),
     ('function', 'buffer_append', 6, 6),
     ('function', 'buffer_append', 7, 9)]),
    "cpp": ("parser.cpp", """\
namespace json {
class Parser : public Base {
 public:
  Value parse(const std::string &text) { Lexer lexer(text); return parseValue(lexer); }
  Value parseValue(Lexer &lexer) { auto token = lexer.next(); return Value(token); }
};

bool Parser::validate(const Value &value) const { return value.type() != Type::Invalid; }
}
""", [
     ('module', 'parser', 1, 1),
     ('class', 'Parser', 2, 3),
     ('method', 'Parser.parse', 4, 4),
     ('method', 'Parser.parseValue', 5, 6),
     ('function', 'Parser::validate', 8, 9)]),
    "csharp": ("Users.cs", """\
namespace App.Models
{
    /// <summary>A registered user.</summary>
    public class UserService : IUserService
    {
        public async Task<User> Find(int id) { return await this.database.Users.FindAsync(id); }
        public void Delete(User user) { this.database.Users.Remove(user); this.database.Save(); }
    }
}
""", [
     ('module', 'Users', 1, 2),
     ('class', 'UserService', 3, 5),
     ('method', 'UserService.Find', 6, 6),
     ('method', 'UserService.Delete', 7, 9)]),
    "ruby": ("request.rb", """\
module Rack
  class Request < Base
    def initialize(env)
      @env = env; @params = nil; @cookies = parse_cookies(env['HTTP_COOKIE'])
    end
    def params
      @params ||= query_params.merge(body_params).merge(path_params)
    end
  end
end
""", [
     ('module', 'Rack', 1, 1),
     ('class', 'Rack.Request', 2, 2),
     ('method', 'Rack.Request.initialize', 3, 5),
     ('method', 'Rack.Request.params', 6, 10)]),
    "php": ("User.php", """\
<?php
namespace App;

class User extends Model {
    public function save(array $options = []): bool { return $this->query()->save($this, $options); }
    public function delete(): bool { return $this->query()->where('id', $this->id)->delete(); }
}
""", [
     ('module', 'User', 1, 2),
     ('class', 'User', 4, 4),
     ('method', 'User.save', 5, 5),
     ('method', 'User.delete', 6, 7)]),
    "kotlin": ("Client.kt", """\
package example

class HttpClient(private val engine: Engine) {
    fun get(url: String): Response { val request = Request(url, "GET"); return engine.execute(request) }
    fun post(url: String, body: String): Response { return engine.execute(Request(url, "POST", body)) }
}

fun defaultClient() = HttpClient(DefaultEngine())
""", [
     ('module', 'Client', 1, 1),
     ('class', 'HttpClient', 3, 3),
     ('method', 'HttpClient.get', 4, 4),
     ('method', 'HttpClient.post', 5, 6),
     ('function', 'defaultClient', 8, 8)]),
    "swift": ("Store.swift", """\
import Foundation

public final class Store {
    func save(_ item: Item) throws { let data = try encoder.encode(item); try data.write(to: url) }
    func load(id: String) throws -> Item { let data = try Data(contentsOf: url); return try decoder.decode(Item.self, from: data) }
}

func makeStore() -> Store { Store() }
""", [
     ('module', 'Store', 1, 1),
     ('class', 'Store', 3, 3),
     ('method', 'Store.save', 4, 4),
     ('method', 'Store.load', 5, 6),
     ('function', 'makeStore', 8, 8)]),
    "scala": ("Routes.scala", """\
package example

object Routes {
  def users(service: UserService): Route = path("users") { get { complete(service.all()) } }
  def health(checks: Seq[Check]): Route = path("health") { get { complete(checks.map(_.run())) } }
}
""", [
     ('module', 'Routes', 1, 1),
     ('class', 'Routes', 3, 3),
     ('method', 'Routes.users', 4, 4),
     ('method', 'Routes.health', 5, 6)]),
    "lua": ("module.lua", """\
local M = {}

-- Creates a new buffer with the given options and default highlights.
function M.new(options)
  local buffer = vim.api.nvim_create_buf(false, true)
  return setmetatable({ buffer = buffer, options = options }, M)
end

M.close = function(self) vim.api.nvim_buf_delete(self.buffer, { force = true }) end

return M
""", [
     ('module', 'module', 1, 1),
     ('function', 'M.new', 3, 4),
     ('function', 'M.new', 5, 7),
     ('function', 'M.close', 9, 9),
     ('module', 'module', 11, 11)]),
    "bash": ("install.sh", """\
#!/usr/bin/env bash
set -euo pipefail

install_model() {
  local target="$1"
  mkdir -p "$target" && cp model.onnx tokenizer.json "$target/"
}
""", [
     ('module', 'install', 1, 2),
     ('function', 'install_model', 4, 7)]),
    "python": ("client.py", """\
import httpx


class Client(BaseClient):
    def send(self, request, *, stream=False):
        response = self._send_handling_auth(request, auth=self.auth, follow=True)
        return response

    def close(self):
        self._transport.close(); self._state = ClientState.CLOSED


def request(method, url, **kwargs):
    with Client() as client:
        return client.request(method, url, **kwargs)
""", [
     ('module', 'client', 1, 1),
     ('class', 'Client', 4, 4),
     ('method', 'Client.send', 5, 5),
     ('method', 'Client.send', 6, 6),
     ('method', 'Client.send', 7, 7),
     ('method', 'Client.close', 9, 10),
     ('function', 'request', 13, 15)]),
}
