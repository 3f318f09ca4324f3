import sys


def main() -> None:
    if sys.argv[1:2] == ["doctor"]:  # the linter's fast path: no typer, rich or pydantic
        from infertune.doctor.cli import main as doctor

        code = doctor(sys.argv[2:])
        if code is not None:
            sys.exit(code)
    from infertune.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
