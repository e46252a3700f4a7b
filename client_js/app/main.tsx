import { render } from "preact";
import { App } from "./components/App";
import { resume } from "./stores/auth";
import { $route } from "./stores/route";
import "./styles.css";

// Connect before the first render: components' effects run child first, and the open chat needs the socket.
if ($route.get().name !== "link") resume();
render(<App />, document.getElementById("app")!);
