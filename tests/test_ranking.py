"""Each ranking rule pinned on a small workspace, with the real model and a real index:
a symbol query finds its definition, tests and docs rank below implementation (unless asked
for), a low-similarity exact name is not vetoed, and nonsense returns nothing."""

from __future__ import annotations

import pytest

from rag_lsp.config import Settings
from rag_lsp.search.results import SearchFilters
from rag_lsp.workspace import Workspace

from .conftest import SAMPLE_FILES, write_files

FILES = {
    **SAMPLE_FILES,
    # A test file that talks about redirects more than the code that follows them.
    "tests/test_client.py": '''
        """Tests for following redirects."""

        from src.http.client import follow_redirects


        def test_follow_redirects_follows_a_redirect_to_its_location():
            """A redirect response is followed to the redirect location."""
            assert follow_redirects(FakeRedirectResponse(302)).status == 200


        def test_follow_redirects_stops_after_too_many_redirects():
            """Redirects beyond the limit raise; redirect loops never hang."""
        ''',
    # A dependency-injection marker: its name says little to the model.
    "app/params.py": '''
        class Depends:
            """Declare that a parameter is provided by calling another function."""

            def __init__(self, dependency=None, *, use_cache=True):
                self.dependency = dependency
                self.use_cache = use_cache
        ''',
    "app/routing.py": '''
        from app.params import Depends


        def get_db():
            return connect()


        def list_users(db=Depends(get_db)):
            return db.query("users")


        def list_items(db=Depends(get_db), user=Depends(current_user)):
            return db.query("items", owner=user)
        ''',
    # A TypeScript class and a module that uses it (no Python AST here).
    "web/router.ts": """
        export class Router {
          private routes: Map<string, Handler> = new Map()

          add(path: string, handler: Handler): void {
            this.routes.set(path, handler)
          }
        }
        """,
    "web/app.ts": """
        import { Router } from './router'

        const router = new Router()
        router.add('/users', listUsers)
        router.add('/items', listItems)
        export default router
        """,
}


@pytest.fixture(scope="module")
def ranked(tmp_path_factory, embedder) -> Workspace:
    root = tmp_path_factory.mktemp("ranking") / "repo"
    write_files(root, FILES)
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    return ws


def paths(ws: Workspace, query: str, **kwargs) -> list[str]:
    return [r.path for r in ws.search(query, **kwargs).results]


def test_a_symbol_query_finds_its_definition_first(ranked):
    assert paths(ranked, "Depends")[0] == "app/params.py"
    assert paths(ranked, "LRUCache")[0] == "src/cache/lru.py"
    assert paths(ranked, "Router")[0] == "web/router.ts"


def test_a_low_similarity_exact_name_is_not_vetoed(ranked):
    top = ranked.search("Depends").results[0]
    assert top.score >= ranked.settings.threshold
    assert top.symbol == "Depends"


def test_a_test_file_does_not_outrank_its_implementation(ranked):
    found = paths(ranked, "where are redirects followed?", threshold=0.0)
    assert found[0] == "src/http/client.py"
    assert found.index("tests/test_client.py") > 0


def test_asking_for_tests_or_filtering_to_them_lifts_the_prior(ranked):
    assert paths(ranked, "tests for following redirects")[0] == "tests/test_client.py"
    only_tests = paths(ranked, "redirects", filters=SearchFilters(paths=("tests/**",)))
    assert only_tests == ["tests/test_client.py"]


def test_documentation_questions_still_find_documentation(ranked):
    assert paths(ranked, "how do I install it?")[0] == "docs/guide.md"
    assert paths(ranked, "how is the service deployed behind a proxy?")[0] == "docs/guide.md"


def test_each_rule_is_a_setting(ranked):
    """With the test prior switched off (1.0) the test file's wording wins again."""
    plain = Settings.from_dict({**ranked.settings.to_dict(), "rankTestPrior": 1.0})
    unranked = Workspace(ranked.root, plain, ranked.embedder)
    question = "where are redirects followed?"
    assert (paths(unranked, question, threshold=0.0).index("tests/test_client.py")
            < paths(ranked, question, threshold=0.0).index("tests/test_client.py"))


@pytest.mark.parametrize("question", [
    "banana bread recipe",
    "how are rainbows formed",
    "what time does the louvre open",
    "gpfnzukcz momxcxff aeso uettpvler",
])
def test_nonsense_returns_nothing(ranked, question):
    assert ranked.search(question).results == []
    assert ranked.find_chunks(question, limit=20) == []


def test_a_query_whose_best_file_is_weak_returns_nothing(ranked):
    """The answer threshold: nothing is returned unless the best file's own evidence reaches
    it; the results then still go down to the threshold."""
    question = "where are redirects followed?"
    assert paths(ranked, question)[0] == "src/http/client.py"
    strict = Workspace(ranked.root, Settings.from_dict(
        {**ranked.settings.to_dict(), "answerThreshold": 0.95}), ranked.embedder)
    assert strict.search(question).results == []
    assert strict.find_chunks(question, limit=20) == []  # nor is anything injected
    # threshold 0 returns everything retrieved
    assert paths(strict, question, threshold=0.0)[0] == "src/http/client.py"
    # one kind of evidence alone scores on a lower scale: the gate is for hybrid search
    assert paths(strict, question, mode="lexical")[0] == "src/http/client.py"
    assert paths(strict, question, mode="vector")[0] == "src/http/client.py"
    # once the best file passes, the others still go down to the threshold
    passing = Workspace(ranked.root, Settings.from_dict(
        {**ranked.settings.to_dict(), "answerThreshold": 0.5}), ranked.embedder)
    found = passing.search(question).results
    assert found[0].path == "src/http/client.py"
    assert any(r.path == "tests/test_client.py" and r.score < 0.5 for r in found)
