import { defineCases } from "../lib/cases.mjs";

defineCases("websocket");
