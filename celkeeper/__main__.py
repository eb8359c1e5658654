from celkeeper.cli.main import process_main

process_main()
