# Shared by the OpenACC examples' Makefiles: each sets NAME, then includes this file.
#
#   make                      gcc -fopenacc (OpenACC runs on the host)
#   make COMPILER=nvc         nvc -acc -Minfo=accel (OpenACC on the GPU), when nvc is installed
#   make run                  build and run (exits 1 if the result is wrong)
#   make tune                 annotune tune $(NAME).c, then commit tuned/<device>/$(NAME).h
#   make check-tuning         annotune check $(NAME).c: exit 1 when this device's committed
#                             header is stale (something it was tuned from changed)
#   make ANNOTUNE='python -m annotune'   how to call annotune, if it is not on PATH
#
# `annotune build` copies this device's committed header from tuned/ (or writes the defaults)
# into build/; it rewrites the file only when its content changes, so make relinks only then.
# Without annotune the program builds with the defaults in the source.

ANNOTUNE ?= annotune
PYTHON ?= python3
COMPILER ?= gcc
CC ?= gcc
ifeq ($(origin CC),default)
  CC := gcc
endif

ifeq ($(COMPILER),nvc)
  CC := nvc
  ACCFLAGS ?= -O2 -acc -Minfo=accel
else
  ACCFLAGS ?= -O2 -fopenacc
endif

# annotune's timing header, if annotune is importable; without it the program times itself.
ANNOTUNE_INCLUDE := $(shell $(PYTHON) -c 'import annotune, os; \
  print(os.path.join(os.path.dirname(annotune.__file__), "include"))' 2>/dev/null)
INCLUDES := $(if $(ANNOTUNE_INCLUDE),-I$(ANNOTUNE_INCLUDE))
HAVE_ANNOTUNE := $(shell command -v $(firstword $(ANNOTUNE)) 2>/dev/null)

$(NAME): $(NAME).c build/$(NAME).tuned.h
	$(CC) $(ACCFLAGS) $(INCLUDES) -include build/$(NAME).tuned.h $(NAME).c -o $@ -lm

build/$(NAME).tuned.h: FORCE
	@mkdir -p build
ifneq ($(HAVE_ANNOTUNE),)
	$(ANNOTUNE) build $(NAME).c -o $@
else
	@echo "warning: '$(firstword $(ANNOTUNE))' not found: building $(NAME) with its defaults"
	@test -f $@ || echo '/* annotune not found: the defaults in $(NAME).c */' > $@
endif

run: $(NAME)
	./$(NAME)

tune:
	$(ANNOTUNE) tune $(NAME).c --budget 40

check-tuning:
	$(ANNOTUNE) check $(NAME).c $(CHECK_FLAGS)

clean:
	rm -rf $(NAME) build

FORCE:
.PHONY: run tune check-tuning clean FORCE
