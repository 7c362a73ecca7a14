from rag_lsp.cli import main

raise SystemExit(main())
