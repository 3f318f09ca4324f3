from infertune.cli import main

main()
