#include "catch.h"
