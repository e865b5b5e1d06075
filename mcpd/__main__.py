from mcpd.cli.main import main

main()
