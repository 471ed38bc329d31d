from annotune.cli import main

main()
