from celkeeper.cli.main import main

raise SystemExit(main())
